#include "control/store_socket.hpp"

#include <unistd.h>

#include <cctype>
#include <climits>
#include <cstring>

namespace sparcoll::control {

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) reset(std::exchange(other.fd_, -1));
  return *this;
}

void UniqueFd::reset(int fd) noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

std::string errno_text(int err) {
  char buf[256];
  // GNU strerror_r may return a static string instead of filling buf.
  std::string text = ::strerror_r(err, buf, sizeof buf);
  if (!text.empty()) text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
  return text;
}

int poll_timeout_ms(Clock::time_point deadline) noexcept {
  auto now = Clock::now();
  if (now >= deadline) return 0;
  auto left_us = std::chrono::duration_cast<std::chrono::microseconds>(deadline - now).count();
  auto left_ms = (left_us + 999) / 1000;
  return left_ms > INT_MAX ? INT_MAX : static_cast<int>(left_ms);
}

}  // namespace sparcoll::control
