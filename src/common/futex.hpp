// Raw futex calls on a 32-bit atomic. The progress and collective threads sleep with a timeout,
// which std::atomic::wait has not, and std::atomic::notify may skip the syscall for a waiter it
// does not know of (one sleeping here), so whoever wakes such a sleeper calls futex_wake.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <ctime>

namespace sparcoll {

// Sleeps while *addr == expected, at most `nanoseconds` (< 1 s), or until futex_wake.
inline void futex_wait_for(std::atomic<std::uint32_t>* addr, std::uint32_t expected, long nanoseconds) {
  struct timespec ts{0, nanoseconds};
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(addr), FUTEX_WAIT_PRIVATE, expected, &ts, nullptr, 0);
}

// Wakes every thread sleeping in futex_wait_for on addr.
inline void futex_wake(std::atomic<std::uint32_t>* addr) {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(addr), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr, 0);
}

}  // namespace sparcoll
