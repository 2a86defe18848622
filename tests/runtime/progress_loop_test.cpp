// runtime::ProgressLoop, the thread every progress thread is: it steps its handler until
// stopped, then calls stopped() on its own thread; a submission's notify() reaches a sleeping
// loop; in event mode it arms the handler's descriptor, sleeps on it and wakes for its events.
// No timing is asserted: waits are bounded by generous deadlines only so a bug fails, not hangs.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "runtime/progress_loop.hpp"

namespace {

using sparcoll::runtime::Handler;
using sparcoll::runtime::Idle;
using sparcoll::runtime::IdlePolicy;
using sparcoll::runtime::ProgressLoop;
using sparcoll::runtime::Waiting;

// Waits up to 10 s for pred; false if it never held.
template <class Pred>
bool eventually(Pred pred) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// Takes "submissions" (a counter another thread raises) one per round, like a progress thread
// takes ops from its queue; idle with nothing expected otherwise (or what `waiting` says).
class CountingHandler final : public Handler {
 public:
  explicit CountingHandler(Waiting w = Waiting::nothing) : waiting(w) {}
  bool step() override {
    ++rounds;
    if (taken.load() < submitted.load()) {
      taken.fetch_add(1);
      return true;
    }
    return false;
  }
  Idle idle() override { return Idle{waiting, nullptr}; }
  void stopped() override { stopped_on = std::this_thread::get_id(); }

  const Waiting waiting;
  std::atomic<int> submitted{0}, taken{0};
  std::atomic<long> rounds{0};
  std::thread::id stopped_on;
};

// Raises the handler's submissions by n, notifying the loop after each, and waits until the
// loop took them all.
bool submit_and_wait(CountingHandler& handler, ProgressLoop& loop, int n) {
  const int target = handler.submitted.load() + n;
  for (int i = 0; i < n; ++i) {
    handler.submitted.fetch_add(1);
    loop.notify();
  }
  return eventually([&] { return handler.taken.load() == target; });
}

TEST(ProgressLoop, StepsItsHandlerTakesEverySubmissionAndStopsOnItsThread) {
  CountingHandler handler;
  std::thread::id loop_thread;
  {
    ProgressLoop loop(handler, /*idle_spin_us=*/0, /*oversubscribed=*/false, /*event_mode=*/false);
    ASSERT_TRUE(loop.start("sc-test-loop"));
    // With no spin window the loop naps between empty rounds; each notify() ends a nap.
    EXPECT_TRUE(submit_and_wait(handler, loop, 200));
    loop.stop();
    EXPECT_NE(handler.stopped_on, std::thread::id());
    EXPECT_NE(handler.stopped_on, std::this_thread::get_id());
    const long rounds = handler.rounds.load();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_EQ(handler.rounds.load(), rounds);  // stopped means no more rounds
    loop.stop();  // a second stop is harmless
  }
}

// A thread that no peer needs before its next submission (Waiting::submission) sleeps until
// notify() wakes it: every submission is taken, and while idle it runs about one round a
// millisecond (its bounded sleep), not one per 50 us nap. Only a loose upper bound on the rounds
// is asserted (a slow host makes fewer), counted from 20 ms after the last submission: after
// activity the loop first runs 63 rounds before it reads the clock (under ASan those spilled
// into the count: 155 rounds).
TEST(ProgressLoop, ASubmissionWaitSleepsUntilNotifiedAndTakesEverySubmission) {
  CountingHandler handler(Waiting::submission);
  ProgressLoop loop(handler, /*idle_spin_us=*/0, /*oversubscribed=*/false, /*event_mode=*/false);
  ASSERT_TRUE(loop.start("sc-test-loop"));
  ASSERT_TRUE(submit_and_wait(handler, loop, 200));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const long before = handler.rounds.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_LE(handler.rounds.load() - before, 400);  // ~100; the 50 us naps made ~800
  EXPECT_TRUE(submit_and_wait(handler, loop, 1));
  loop.stop();
}

// A handler whose channel is a pipe: event mode sleeps on its read end once idle.
class PipeHandler final : public Handler {
 public:
  PipeHandler() {
    EXPECT_EQ(pipe2(fds, O_NONBLOCK | O_CLOEXEC), 0);
  }
  ~PipeHandler() {
    close(fds[0]);
    close(fds[1]);
  }
  bool step() override {
    char byte;
    if (read(fds[0], &byte, 1) == 1) {
      received.fetch_add(1);
      return true;
    }
    return false;
  }
  Idle idle() override { return Idle{Waiting::nothing, nullptr}; }
  int event_fd() const override { return fds[0]; }
  void arm() override { armed.fetch_add(1); }
  void slept() override { sleeps.fetch_add(1); }

  int fds[2] = {-1, -1};
  std::atomic<int> received{0}, armed{0}, sleeps{0};
};

TEST(ProgressLoop, EventModeArmsTheHandlersDescriptorAndWakesForItsEvents) {
  PipeHandler handler;
  ProgressLoop loop(handler, 0, false, /*event_mode=*/true);
  ASSERT_TRUE(loop.start("sc-test-loop"));
  ASSERT_TRUE(eventually([&] { return handler.sleeps.load() > 0; }));  // idle: armed, slept
  EXPECT_GT(handler.armed.load(), 0);
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(write(handler.fds[1], "x", 1), 1);
    ASSERT_TRUE(eventually([&] { return handler.received.load() == i + 1; }));
  }
  loop.stop();
}

TEST(IdlePolicy, CountsEmptyRoundsInARowUntilSomethingMoves) {
  IdlePolicy idle(0, false);
  EXPECT_EQ(idle.empty_round(), 2u);  // starts as if idle for long: no spin window before activity
  idle.moved();
  EXPECT_EQ(idle.empty_round(), 1u);
  EXPECT_EQ(idle.empty_round(), 2u);
  idle.moved();
  EXPECT_EQ(idle.empty_round(), 1u);
}

TEST(IdlePolicy, AnOtherThreadWaitEndsWhenItsFlagIsSet) {
  IdlePolicy idle(0, false);
  std::atomic<std::uint32_t> flag{0};
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    flag.store(1);
  });
  const Idle waiting{Waiting::other_thread, &flag};
  ASSERT_TRUE(eventually([&] {
    idle.wait(waiting);
    return flag.load() != 0;
  }));
  setter.join();
}

}  // namespace
