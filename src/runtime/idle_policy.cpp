#include "runtime/idle_policy.hpp"

#include <sched.h>

#include <thread>

#include "common/futex.hpp"

namespace sparcoll::runtime {

namespace {
// Empty rounds before a thread with an operation in flight yields its core. Even with a core
// per rank the scheduler can put both ranks' threads on one core for a while (after setup,
// while the other core runs something else): spinning 4096 rounds before each yield then cost
// every exchange a scheduler tick, and 1 fresh 2-rank job in 6 ran its first 20-40 ms of 4 KiB
// allreduces at 90-240 us instead of 1.5-2. A yield with nothing else runnable costs well under
// a microsecond, so it comes after 64 empty rounds.
constexpr std::uint32_t kSpinRoundsBeforeYield = 64;
// After this many, the peer is slow (a long compute phase between its steps): nap instead.
constexpr std::uint32_t kYieldRoundsBeforeNap = 65536;
// In the spin window, empty rounds before each of them yields even on a host with a core per
// thread, and how often the clock is read.
constexpr std::uint32_t kIdleRoundsBeforeYield = 256;
constexpr std::uint32_t kClockEvery = 64;
// A pending send or recv's peer usually answers within a round trip (a ping-pong, a pipeline
// stage): it spins at least 2 ms before napping, and naps briefly (a nap of 20 us costs a 70 us
// wake-up with the kernel's timer slack; torch's ping-pong took 270 us against gloo's 180).
constexpr auto kReplySpin = std::chrono::microseconds(2000);
constexpr long kReplyNapNs = 20'000;
// Naps with nothing expected: short, since a remote operation cannot wake the thread; after a
// second of nothing (a long compute phase) longer ones, since 20000 wake-ups a second cost an
// idle rank ~10% of a core.
constexpr long kNapNs = 50'000;
constexpr long kLongNapNs = 500'000;
// Nothing to poll until a submission: while the calling thread drives the channel
// (Waiting::caller_drives), and where no peer needs this thread first (Waiting::submission; the
// short naps above cost 8 ranks on 2 cores half a core for a second after every block-sparse
// operation, and the dense allreduce that followed one took 28 ms instead of 22: 16 MiB,
// docs/perf.md, "Idle CPU"). A submission wakes the thread, and nothing is in flight meanwhile,
// so the bound is only a backstop (every sleep here has one). At 1 ms, both threads of every rank
// woke 1000 times a second each while the model computed: an idle rank took 2.1-3.0% of a core,
// 0.3-0.4% bounded at 20 ms (docs/perf-log.md, "Idle threads: 20 ms between looks").
constexpr long kUntilSubmissionSleepNs = 20'000'000;
// Another thread finishes the operation and wakes the flag's futex: naps between polls of a
// channel that must be served meanwhile, else one sleep until the wake-up (bounded, as every
// sleep here). The short naps cost: at 4 ranks on 2 cores, 50000 wake-ups a second per waiting
// rank made the hybrid's block-sparse half 30% slower than block-sparse alone (16 MiB, 0.1%
// density over shm: 2.75 against 2.06 ms, medians of 10 interleaved runs; with one sleep 2.09).
// The sleep's bound is long: the thread that finishes the operation wakes it, and that
// operation has its own deadline, so waking to look cost only. Bounded at 1 ms, each 8 ms
// allreduce of 8 ranks on 2 cores woke every rank's waiting thread about 7 times, each wake-up
// taking a core from the progress threads: the hybrid was 1.06-1.12x block-sparse there, and
// 0.98-1.00x bounded at 20 ms (16 MiB at 1% over shm, both in one program, 12 programs).
constexpr long kOtherThreadNapNs = 20'000;
constexpr long kOtherThreadSleepNs = 20'000'000;
// Before that sleep, a few looks at the flag with pauses and then with yields between them, as
// std::atomic::wait does for the caller of block-sparse. Sleeping at once, the hybrid's caller at
// 2 ranks over shm took 1.10-1.34x block-sparse's time (8 MiB at 5 and 10%, both in one program,
// 63-74 programs) whenever the host's two vCPUs were far apart (a cache-line round trip of
// 340 ns instead of 100); with these looks first, 1.01. Elsewhere the same (docs/perf-log.md,
// "Two ranks over shm on the host's two placements; the hybrid's wait with a look first").
constexpr int kOtherThreadPauses = 16;
constexpr int kOtherThreadYields = 12;

// A few looks at `flag` before a sleep on it: true when it was set meanwhile.
bool look_before_sleeping(const std::atomic<std::uint32_t>& flag) noexcept {
  for (int i = 0; i < kOtherThreadPauses; ++i) {
    if (flag.load(std::memory_order_acquire) != 0) return true;
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  }
  for (int i = 0; i < kOtherThreadYields; ++i) {
    if (flag.load(std::memory_order_acquire) != 0) return true;
    sched_yield();
  }
  return false;
}
}  // namespace

void IdlePolicy::wait(const Idle& idle, std::atomic<std::uint32_t>* wake, std::uint32_t seen) {
  switch (idle.waiting) {
    case Waiting::op_in_flight: wait_in_flight(); return;
    case Waiting::other_thread:
      if (!idle.poll_meanwhile && look_before_sleeping(*idle.flag)) return;
      futex_wait_for(const_cast<std::atomic<std::uint32_t>*>(idle.flag), 0,
                     idle.poll_meanwhile ? kOtherThreadNapNs : kOtherThreadSleepNs);
      return;
    case Waiting::reply_expected:
      wait_idle(spin_ > kReplySpin ? spin_ : Clock::duration(kReplySpin), kReplyNapNs, kReplyNapNs, wake, seen);
      return;
    case Waiting::nothing: wait_idle(spin_, kNapNs, kLongNapNs, wake, seen); return;
    case Waiting::submission: wait_idle(spin_, kUntilSubmissionSleepNs, kUntilSubmissionSleepNs, wake, seen); return;
    case Waiting::caller_drives:
      if (wake != nullptr) futex_wait_for(wake, seen, kUntilSubmissionSleepNs);
      return;
  }
}

void IdlePolicy::wait_in_flight() noexcept {
  if (!oversubscribed_ && empty_rounds_ <= kSpinRoundsBeforeYield) return;
  if (empty_rounds_ > kYieldRoundsBeforeNap)
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  else
    sched_yield();
}

void IdlePolicy::wait_idle(Clock::duration spin, long nap_ns, long long_nap_ns, std::atomic<std::uint32_t>* wake,
                           std::uint32_t seen) {
  if (empty_rounds_ == 1) {
    idle_since_ = Clock::now();
    spinning_ = true;
  }
  if (spinning_) {
    // Once the window is over every round sleeps (it used to spin 63 rounds between sleeps: an
    // idle communicator burned 20% of a core per rank on 2 cores, time a training step's
    // compute lost).
    if ((empty_rounds_ % kClockEvery) != 0 || Clock::now() - idle_since_ < spin) {
      if (oversubscribed_ || empty_rounds_ > kIdleRoundsBeforeYield) sched_yield();
      return;
    }
    spinning_ = false;
  }
  if (wake == nullptr) {
    sched_yield();
    return;
  }
  const bool long_idle = Clock::now() - idle_since_ > std::chrono::seconds(1);
  futex_wait_for(wake, seen, long_idle ? long_nap_ns : nap_ns);
}

}  // namespace sparcoll::runtime
