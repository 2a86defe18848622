// Noticing that a peer on the same host is gone, without a syscall per poll.
//
// Two signals: the peer's "closed" flag in its segment header (written by its driver
// destructor, so an in-process teardown is seen) and a pidfd that becomes readable when the
// peer process exits (a crash or SIGKILL). Channels look at them at most every
// kCheckInterval, timed with the vDSO coarse clock read every kPollsPerClockRead polls.
#pragma once

#include <poll.h>
#include <time.h>

#include <cstdint>
#include <string>
#include <vector>

#include "sparcoll/status.hpp"
#include "transport/driver.hpp"

namespace sparcoll::transport::shm {

// One pidfd per peer process (driver-wide; channels only poll the fds).
class PeerProcesses {
 public:
  PeerProcesses() = default;
  PeerProcesses(const PeerProcesses&) = delete;
  PeerProcesses& operator=(const PeerProcesses&) = delete;
  ~PeerProcesses();

  // Opens a pidfd for each peer that is another process. A peer that already exited fails
  // setup with peer_failure. Peers in this very process (tests) get -1: their closed flag is enough.
  Status open(const DriverContext& ctx);
  // pidfd of the i-th peer of ctx.peers, or -1 when it is not watched by pidfd.
  int pidfd(std::size_t i) const { return fds_[i]; }
  // Without pidfd support (kernels before 5.3) liveness falls back to kill(pid, 0).
  bool use_kill(std::size_t i) const { return kill_pids_[i] > 0; }
  std::int64_t pid(std::size_t i) const { return kill_pids_[i]; }

 private:
  std::vector<int> fds_;
  std::vector<std::int64_t> kill_pids_;  // > 0 where we fall back to kill(pid, 0)
};

// Rate limit for liveness checks: cheap enough to call on every poll.
class LivenessClock {
 public:
  static constexpr std::uint32_t kPollsPerClockRead = 16;
  static constexpr std::uint64_t kCheckIntervalNs = 2'000'000;

  bool due() {
    if (++polls_ % kPollsPerClockRead != 0) return false;
    struct timespec now {};
    clock_gettime(CLOCK_MONOTONIC_COARSE, &now);  // vDSO: no syscall
    const std::uint64_t ns = static_cast<std::uint64_t>(now.tv_sec) * 1'000'000'000ull + static_cast<std::uint64_t>(now.tv_nsec);
    if (ns < next_ns_) return false;
    next_ns_ = ns + kCheckIntervalNs;
    return true;
  }

 private:
  std::uint32_t polls_ = 0;
  std::uint64_t next_ns_ = 0;
};

// True when the process behind pollfd entry `fd` (from PeerProcesses) has exited.
bool process_exited(const struct pollfd& fd);

}  // namespace sparcoll::transport::shm
