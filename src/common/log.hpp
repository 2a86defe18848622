// Logging: lowercase messages that name the peer, qp or port involved; quiet on the hot path.
// Level from SPARCOLL_LOG_LEVEL (error | warn | info | debug), default warn. Lines go to stderr
// as "sparcoll <level> [<who>] message", where <who> is e.g. "rank 2" once identity is known.
#pragma once

#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <string>
#include <string_view>

namespace sparcoll::log {

enum class Level : int { error = 0, warn = 1, info = 2, debug = 3 };

void set_level(Level level) noexcept;
Level level() noexcept;
bool parse_level(const std::string& text, Level* out) noexcept;
// The process's identity in log lines ("rank 2", "aggregator 0").
void set_identity(const std::string& who);

bool enabled(Level level) noexcept;
// Writes one line. Control characters and non-ASCII bytes in the formatted text are written as
// \xNN: text that came from a peer (an identity, a reason) can neither forge further lines nor
// send escape sequences to the terminal.
void write(Level level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// `text` with every byte outside printable ASCII written as \xNN (what write() does to a line).
// For peer-supplied text that also travels in Status messages.
std::string printable(std::string_view text);

// Lets a repeated warning through at most once per interval and counts what it held back, so a
// flood (a thousand bad connections) costs one line per interval, not one per event. Not
// thread-safe: each owner is one thread (the store server, a driver's setup).
class RateLimit {
 public:
  explicit RateLimit(std::chrono::milliseconds interval) : interval_(interval) {}
  // True when a line may be written now; then *held_back is how many were not since the last.
  bool allow(std::uint64_t* held_back);
  // " (N more since the last warning)", or "" for none: the tail of the line allow() let through.
  static std::string held_back_note(std::uint64_t held_back);

 private:
  std::chrono::milliseconds interval_;
  std::chrono::steady_clock::time_point next_{};
  std::uint64_t held_back_ = 0;
};

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
