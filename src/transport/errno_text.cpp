// errno_text (declared in setup_util.hpp) on its own: channels use it on their data path's error
// branches, and a program that links a channel alone (tests/fuzz) needs it without the store.
#include <cstring>

#include "transport/setup_util.hpp"

namespace sparcoll::transport {

std::string errno_text(int err) {
  char buffer[128];
  // GNU strerror_r returns a pointer that may or may not be `buffer`.
  std::string text = strerror_r(err, buffer, sizeof buffer);
  // Log lines and messages are lowercase: "connection refused".
  if (!text.empty() && text[0] >= 'A' && text[0] <= 'Z') text[0] = static_cast<char>(text[0] - 'A' + 'a');
  return text;
}

}  // namespace sparcoll::transport
