// Small socket helpers shared by the rendezvous store client and server: an owning file
// descriptor, errno text in the library's lowercase log style, and deadline arithmetic for
// poll(). Nothing here is on the data path.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

namespace sparcoll::control {

// Owns a file descriptor; closes it on destruction. Move-only.
class UniqueFd {
 public:
  UniqueFd() noexcept = default;
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const noexcept { return fd_; }
  bool valid() const noexcept { return fd_ >= 0; }
  void reset(int fd = -1) noexcept;

 private:
  int fd_ = -1;
};

// strerror(err) with a lowercase first letter ("connection refused"), as log lines want it.
std::string errno_text(int err);

using Clock = std::chrono::steady_clock;

// Milliseconds left until `deadline` for poll(): rounded up so a poll never returns just
// before the deadline and spins; 0 once it has passed.
int poll_timeout_ms(Clock::time_point deadline) noexcept;

// Clock::now() + ms, the deadline of an operation that may take up to `ms` milliseconds.
inline Clock::time_point deadline_after(std::uint32_t ms) noexcept {
  return Clock::now() + std::chrono::milliseconds(ms);
}

}  // namespace sparcoll::control
