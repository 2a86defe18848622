// Task (common/task.hpp), the coroutine every point-to-point collective is, and FrameArena, where
// its frames live: results and exceptions come out where a task is awaited, a suspended task
// resumes where it waited, and the arena does not grow with the number of steps or collectives.
#include <coroutine>
#include <new>

#include <gtest/gtest.h>

#include "common/frame_arena.hpp"
#include "common/task.hpp"

namespace {

using sparcoll::ErrorCode;
using sparcoll::FrameArena;
using sparcoll::Status;
using sparcoll::Task;

// Suspends the awaiting task until the test resumes it, as Peers::wait does until the driver
// finds the step complete.
struct Pause {
  std::coroutine_handle<>* waiter;
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) noexcept { *waiter = h; }
  void await_resume() const noexcept {}
};

Task leaf(std::coroutine_handle<>* waiter, int* steps) {
  co_await Pause{waiter};
  ++*steps;
  co_return Status();
}

Task nested(int depth, std::coroutine_handle<>* waiter, int* steps) {
  if (depth == 0) co_return co_await leaf(waiter, steps);
  if (Status s = co_await nested(depth - 1, waiter, steps); !s.ok()) co_return s;
  co_return Status(ErrorCode::mismatch, "depth " + std::to_string(depth));
}

Task many_steps(int count, std::coroutine_handle<>* waiter, int* steps) {
  for (int i = 0; i < count; ++i)
    if (Status s = co_await leaf(waiter, steps); !s.ok()) co_return s;
  co_return Status();
}

Task throws_bad_alloc() {
  throw std::bad_alloc();
  co_return Status();
}

Task awaits_a_throw() { co_return co_await throws_bad_alloc(); }

// Runs a task as a driver would: start, then resume whatever waits until it ends.
Status run(Task& task, std::coroutine_handle<>& waiter, int* resumes) {
  task.start();
  while (!task.done()) {
    ++*resumes;
    std::exchange(waiter, nullptr).resume();
  }
  return task.result();
}

TEST(Task, ASuspendedChainResumesWhereItWaitedAndReturnsItsStatus) {
  std::coroutine_handle<> waiter;
  int steps = 0, resumes = 0;
  {
    Task task = nested(20, &waiter, &steps);
    const Status s = run(task, waiter, &resumes);
    EXPECT_EQ(s.code(), ErrorCode::mismatch);
    EXPECT_EQ(s.message(), "depth 1");  // the innermost non-leaf level's status, passed up unchanged
  }
  EXPECT_EQ(steps, 1);
  EXPECT_EQ(resumes, 1);
  EXPECT_EQ(FrameArena::local().live_frames(), 0u);
}

TEST(Task, AnExceptionInsideComesOutOfTheTopsResult) {
  Task task = awaits_a_throw();
  task.start();
  ASSERT_TRUE(task.done());
  EXPECT_THROW((void)task.result(), std::bad_alloc);
}

TEST(Task, FramesDoNotGrowWithStepsOrCollectives) {
  std::coroutine_handle<> waiter;
  int steps = 0, resumes = 0;
  {
    Task first = many_steps(10, &waiter, &steps);
    ASSERT_TRUE(run(first, waiter, &resumes).ok());
  }
  const std::size_t reserved = FrameArena::local().reserved_bytes();
  EXPECT_GT(reserved, 0u);
  for (int collective = 0; collective < 100; ++collective) {
    Task task = many_steps(1000, &waiter, &steps);
    ASSERT_TRUE(run(task, waiter, &resumes).ok());
  }
  EXPECT_EQ(steps, 10 + 100 * 1000);
  EXPECT_EQ(FrameArena::local().reserved_bytes(), reserved);
  EXPECT_EQ(FrameArena::local().live_frames(), 0u);
}

TEST(FrameArena, FramesFreedOutOfOrderComeBackWhenTheLastOneGoes) {
  FrameArena arena;
  for (int round = 0; round < 1000; ++round) {
    void* a = arena.allocate(100);
    void* b = arena.allocate(5000);
    void* c = arena.allocate(70000);  // above a chunk: a chunk of its own
    arena.release(b, 5000);
    arena.release(a, 100);
    EXPECT_EQ(arena.live_frames(), 1u);
    arena.release(c, 70000);
  }
  EXPECT_EQ(arena.live_frames(), 0u);
  EXPECT_LE(arena.reserved_bytes(), std::size_t{64 * 1024 + 70000 + 64});
}

TEST(FrameArena, FramesAreAlignedForAnyType) {
  FrameArena arena;
  void* frames[5];
  const std::size_t sizes[5] = {1, 17, 33, 100, 7};
  for (int i = 0; i < 5; ++i) {
    frames[i] = arena.allocate(sizes[i]);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(frames[i]) % alignof(std::max_align_t), 0u);
  }
  for (int i = 4; i >= 0; --i) arena.release(frames[i], sizes[i]);
  EXPECT_EQ(arena.live_frames(), 0u);
}

}  // namespace
