// What a progress thread does after a round in which nothing moved: the one idle policy of
// every progress thread (the block-sparse module's, the collective thread, a calling thread
// that drives a collective itself). It spins while a reply is due soon, yields the core when
// threads outnumber cores (spinning there starves the peer being waited for), and sleeps on a
// futex once nothing is expected, in short naps that a submission cuts short (a remote peer
// cannot wake a futex) and longer ones after a second of nothing; or, when no peer can need it
// before this process submits again, until the submission wakes it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace sparcoll::runtime {

using Clock = std::chrono::steady_clock;

// What the thread waits for, as its handler sees it after an empty round.
enum class Waiting : std::uint8_t {
  op_in_flight,    // an operation runs: its peers' messages may come at any moment
  other_thread,    // the operation waits for another thread, which sets and futex-wakes `flag`
  reply_expected,  // nothing runs, but a posted send or receive expects its peer soon (a ping-pong)
  nothing,         // nothing runs or is expected: the next operation usually follows at once
  submission,      // as `nothing`, and no peer needs this thread before this process submits
                   // again (no acknowledgements owed, no peer's operation can finish without
                   // ours): after the spin window it sleeps until a submission wakes it
  caller_drives,   // the calling thread drives the channel itself: sleep until a submission
};

struct Idle {
  Waiting waiting = Waiting::nothing;
  const std::atomic<std::uint32_t>* flag = nullptr;  // other_thread: the thread sleeps while it is 0
  // other_thread: whether the thread's channel must be polled meanwhile (its peers' sends end
  // only when it acknowledges them: Channel::acknowledges_when_polled). Else the thread sleeps
  // until the flag's futex wakes it.
  bool poll_meanwhile = true;
};

class IdlePolicy {
 public:
  // spin_us: how long the thread keeps spinning after its last activity before it naps
  // (SPARCOLL_IDLE_SPIN_US); oversubscribed: more busy threads than cores on this host.
  IdlePolicy(std::uint64_t spin_us, bool oversubscribed) noexcept
      : spin_(std::chrono::microseconds(spin_us)), oversubscribed_(oversubscribed) {}

  // A round moved something.
  void moved() noexcept { empty_rounds_ = 0; }
  // A round moved nothing: counts it, and returns the empty rounds in a row so far.
  std::uint32_t empty_round() noexcept { return ++empty_rounds_; }
  // After empty_round(): spins, yields or sleeps as `idle` calls for. A sleep on `wake` ends when
  // its value is no longer `seen` (read before the round, so a submission during it is not lost).
  void wait(const Idle& idle, std::atomic<std::uint32_t>* wake = nullptr, std::uint32_t seen = 0);

 private:
  void wait_in_flight() noexcept;
  void wait_idle(Clock::duration spin, long nap_ns, long long_nap_ns, std::atomic<std::uint32_t>* wake,
                 std::uint32_t seen);

  Clock::duration spin_;
  bool oversubscribed_;
  // Starts as if idle for long: no spin window before the first activity. A job's first
  // collectives are often small ones the calling thread runs itself, and threads spinning
  // after setup on 2 cores made those 3-10x slower.
  std::uint32_t empty_rounds_ = 1;
  Clock::time_point idle_since_{};
  bool spinning_ = false;  // inside the spin window after the last activity
};

}  // namespace sparcoll::runtime
