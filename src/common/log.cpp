#include "common/log.hpp"

#include <atomic>
#include <cstdio>
#include <mutex>

namespace sparcoll::log {
namespace {
std::atomic<int> g_level{static_cast<int>(Level::warn)};
std::mutex g_identity_mutex;
std::string g_identity;  // guarded by g_identity_mutex
const char* const kNames[] = {"error", "warn", "info", "debug"};
}  // namespace

void set_level(Level level) noexcept { g_level.store(static_cast<int>(level), std::memory_order_relaxed); }
Level level() noexcept { return static_cast<Level>(g_level.load(std::memory_order_relaxed)); }

bool parse_level(const std::string& text, Level* out) noexcept {
  for (int i = 0; i < 4; ++i) {
    if (text == kNames[i]) {
      *out = static_cast<Level>(i);
      return true;
    }
  }
  return false;
}

void set_identity(const std::string& who) {
  std::lock_guard<std::mutex> lock(g_identity_mutex);
  g_identity = who;
}

bool enabled(Level lvl) noexcept { return static_cast<int>(lvl) <= g_level.load(std::memory_order_relaxed); }

void write(Level lvl, const char* fmt, ...) {
  char text[1024];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(text, sizeof text, fmt, args);
  va_end(args);
  std::string who;
  {
    std::lock_guard<std::mutex> lock(g_identity_mutex);
    who = g_identity;
  }
  // One fprintf per line keeps lines from different threads whole.
  if (who.empty())
    std::fprintf(stderr, "sparcoll %s: %s\n", kNames[static_cast<int>(lvl)], text);
  else
    std::fprintf(stderr, "sparcoll %s [%s]: %s\n", kNames[static_cast<int>(lvl)], who.c_str(), text);
}

}  // namespace sparcoll::log
