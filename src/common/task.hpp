// Task: the resumable body of a collective. The point-to-point algorithms are C++20 coroutines
// returning Task; where the old code waited for a step's messages they `co_await peers.wait()`
// and give the thread back to whoever drives them (p2p/drive.hpp), which polls the channel and
// resumes them once the step is complete. So a collective is a state machine a progress loop
// can drive, like block-sparse aggregation, not a function that owns a thread until it ends.
//
//   Task ring_allreduce(Peers& peers, ...) {
//     peers.send(right, tag, chunk, bytes);
//     peers.recv_reduce(left, tag, acc, n, DataType::f32, op);
//     if (Status s = co_await peers.wait(); !s.ok()) co_return s;
//     ...
//     co_return Status();
//   }
//
// A Task starts when first awaited (or, at the top, when its driver starts it); awaiting one
// from another runs it and resumes the caller with its Status when it ends (symmetric
// transfer: no stack grows with the nesting). Frames come from the thread's FrameArena, so a
// collective allocates nothing once the thread has run it before. An exception thrown inside
// (std::bad_alloc of an algorithm's buffers) comes out where the Task is awaited, or from
// result() at the top.
#pragma once

#include <coroutine>
#include <exception>
#include <utility>

#include "common/frame_arena.hpp"
#include "sparcoll/status.hpp"

namespace sparcoll {

class [[nodiscard]] Task {
 public:
  struct promise_type {
    Status status;
    std::exception_ptr error;
    std::coroutine_handle<> caller = std::noop_coroutine();  // resumed when this task ends

    static void* operator new(std::size_t bytes) { return FrameArena::local().allocate(bytes); }
    static void operator delete(void* frame, std::size_t bytes) noexcept { FrameArena::local().release(frame, bytes); }

    Task get_return_object() noexcept { return Task(Handle::from_promise(*this)); }
    std::suspend_always initial_suspend() noexcept { return {}; }
    struct Ended {
      bool await_ready() const noexcept { return false; }
      std::coroutine_handle<> await_suspend(std::coroutine_handle<promise_type> self) noexcept {
        return self.promise().caller;
      }
      void await_resume() const noexcept {}
    };
    Ended final_suspend() noexcept { return {}; }
    void return_value(Status s) noexcept { status = std::move(s); }
    void unhandled_exception() noexcept { error = std::current_exception(); }
  };
  using Handle = std::coroutine_handle<promise_type>;

  Task(Task&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  Task& operator=(Task&& other) noexcept {
    if (this != &other) {
      if (handle_) handle_.destroy();
      handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
  }
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;
  ~Task() {
    if (handle_) handle_.destroy();
  }

  // Awaited from another task: runs this one, then resumes the caller with its Status.
  bool await_ready() const noexcept { return false; }
  std::coroutine_handle<> await_suspend(std::coroutine_handle<> caller) noexcept {
    handle_.promise().caller = caller;
    return handle_;
  }
  Status await_resume() { return take_result(); }

  // At the top (the driver): runs the task until it first waits, or to its end.
  void start() { handle_.resume(); }
  bool done() const noexcept { return handle_.done(); }
  // The Status it returned (once done()); rethrows what escaped it.
  Status result() { return take_result(); }

 private:
  explicit Task(Handle h) noexcept : handle_(h) {}
  Status take_result() {
    promise_type& p = handle_.promise();
    if (p.error) std::rethrow_exception(std::exchange(p.error, nullptr));
    return std::move(p.status);
  }
  Handle handle_;
};

}  // namespace sparcoll
