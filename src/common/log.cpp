#include "common/log.hpp"

#include <atomic>
#include <cstdio>
#include <mutex>
#include <string_view>

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

std::string printable(std::string_view text) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    const auto byte = static_cast<unsigned char>(ch);
    if (byte >= 0x20 && byte < 0x7f) {
      out.push_back(ch);
    } else {
      out += "\\x";
      out.push_back(kHex[byte >> 4]);
      out.push_back(kHex[byte & 15]);
    }
  }
  return out;
}

bool RateLimit::allow(std::uint64_t* held_back) {
  const auto now = std::chrono::steady_clock::now();
  if (now < next_) {
    ++held_back_;
    return false;
  }
  next_ = now + interval_;
  *held_back = held_back_;
  held_back_ = 0;
  return true;
}

std::string RateLimit::held_back_note(std::uint64_t held_back) {
  if (held_back == 0) return std::string();
  return " (" + std::to_string(held_back) + " more since the last warning)";
}

void write(Level lvl, const char* fmt, ...) {
  char raw[1024];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(raw, sizeof raw, fmt, args);
  va_end(args);
  const std::string text = printable(raw);
  std::string who;
  {
    std::lock_guard<std::mutex> lock(g_identity_mutex);
    who = g_identity;
  }
  // One fprintf per line keeps lines from different threads whole.
  if (who.empty())
    std::fprintf(stderr, "sparcoll %s: %s\n", kNames[static_cast<int>(lvl)], text.c_str());
  else
    std::fprintf(stderr, "sparcoll %s [%s]: %s\n", kNames[static_cast<int>(lvl)], who.c_str(), text.c_str());
}

}  // namespace sparcoll::log
