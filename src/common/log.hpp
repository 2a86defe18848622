// Logging: lowercase messages that name the peer, qp or port involved; quiet on the hot path.
// Level from SPARCOLL_LOG_LEVEL (error | warn | info | debug), default warn. Lines go to stderr
// as "sparcoll <level> [<who>] message", where <who> is e.g. "rank 2" once identity is known.
#pragma once

#include <cstdarg>
#include <string>

namespace sparcoll::log {

enum class Level : int { error = 0, warn = 1, info = 2, debug = 3 };

void set_level(Level level) noexcept;
Level level() noexcept;
bool parse_level(const std::string& text, Level* out) noexcept;
// The process's identity in log lines ("rank 2", "aggregator 0").
void set_identity(const std::string& who);

bool enabled(Level level) noexcept;
void write(Level level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace sparcoll::log

#define SPARCOLL_LOG(lvl, ...)                                                   \
  do {                                                                           \
    if (::sparcoll::log::enabled(::sparcoll::log::Level::lvl))                   \
      ::sparcoll::log::write(::sparcoll::log::Level::lvl, __VA_ARGS__);          \
  } while (0)
#define SC_LOG_ERROR(...) SPARCOLL_LOG(error, __VA_ARGS__)
#define SC_LOG_WARN(...) SPARCOLL_LOG(warn, __VA_ARGS__)
#define SC_LOG_INFO(...) SPARCOLL_LOG(info, __VA_ARGS__)
#define SC_LOG_DEBUG(...) SPARCOLL_LOG(debug, __VA_ARGS__)
