// The progress runtime: one thread that drives a Handler round after round (take submissions,
// poll the channel, step the operations) and, between rounds that moved nothing, follows the
// one idle policy (idle_policy.hpp). Every progress thread of the library is one of these: each
// block-sparse progress thread (block_sparse::ProgressThread, a handler of aggregation messages)
// and the collective thread (coll::Executor, a handler that steps the point-to-point
// collectives, coroutines over p2p::Peers). docs/architecture.md, "One progress runtime".
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>

#include "runtime/idle_policy.hpp"

namespace sparcoll::runtime {

// What a progress thread runs. Called on the loop's thread only, one call at a time: one
// virtual call per round, none per message or block.
class Handler {
 public:
  // One round: submissions, the channel, the operations' progress. True when anything moved.
  virtual bool step() = 0;
  // After a round that moved nothing: what the thread waits for.
  virtual Idle idle() = 0;
  // Event mode (SPARCOLL_POLL_MODE=event): the descriptor the thread may sleep on once idle
  // (the channel's), or -1 to keep polling.
  virtual int event_fd() const { return -1; }
  // Event mode: true while queued work needs polling (sends waiting for room raise no event).
  virtual bool must_poll() { return false; }
  // Event mode: asks the channel to signal event_fd() at its next message; one more round runs
  // before the thread sleeps, so nothing that arrived before the arming is missed.
  virtual void arm() {}
  // After a sleep on event_fd() (deadlines are checked at once: the sleep was long).
  virtual void slept() {}
  // Once, on the loop's thread, when the loop stops.
  virtual void stopped() {}

 protected:
  ~Handler() = default;
};

class ProgressLoop {
 public:
  ProgressLoop(Handler& handler, std::uint64_t idle_spin_us, bool oversubscribed, bool event_mode);
  ~ProgressLoop();
  ProgressLoop(const ProgressLoop&) = delete;
  ProgressLoop& operator=(const ProgressLoop&) = delete;

  // Starts the thread named `name` (what top -H, perf and gdb show; at most 15 characters),
  // pinned to `core` when it is >= 0 (false when the pinning failed: the thread then runs
  // unpinned).
  bool start(const char* name, int core = -1);
  // Ends the loop after its current round and joins the thread (then Handler::stopped()).
  void stop();
  // Any thread, after handing the handler work: wakes the thread if it sleeps.
  void notify() noexcept;

 private:
  void run();
  void event_wait();

  Handler& handler_;
  IdlePolicy idle_;
  std::atomic<std::uint32_t> wake_{0};
  std::atomic<bool> stop_{false};
  int wake_fd_ = -1;     // event mode: written by notify(), slept on with the channel's descriptor
  bool armed_ = false;   // event mode: arm() was called since the last activity
  std::thread thread_;
};

}  // namespace sparcoll::runtime
