// The signals sparcoll-run handles synchronously, in its poll loop, through a signalfd:
// SIGCHLD (a child exited) and SIGINT, SIGTERM, SIGHUP (forwarded to the children) unless the
// launcher was started with them ignored.
#pragma once

#include <signal.h>

#include <memory>
#include <string>
#include <vector>

#include "sparcoll/status.hpp"

namespace sparcoll::run {

class LauncherSignals {
 public:
  // Blocks the signals and opens the signalfd. Call before any thread starts (the store server's)
  // so every thread inherits the mask and none of them takes a signal the default way.
  // Also ignores SIGPIPE: a reader of our output going away must not kill the job.
  static Status create(std::unique_ptr<LauncherSignals>* out);
  ~LauncherSignals();
  LauncherSignals(const LauncherSignals&) = delete;
  LauncherSignals& operator=(const LauncherSignals&) = delete;

  int fd() const { return fd_; }
  // The mask the launcher started with; children restore it before exec.
  const sigset_t& original_mask() const { return original_mask_; }
  // The signals pending on the signalfd (SIGCHLD at most once however many children exited).
  std::vector<int> read_pending();

 private:
  LauncherSignals(int fd, const sigset_t& original_mask) : fd_(fd), original_mask_(original_mask) {}

  int fd_;
  sigset_t original_mask_;
};

// "sigkill", "sigsegv"; "signal 40" for signals without a name.
std::string signal_name(int sig);

}  // namespace sparcoll::run
