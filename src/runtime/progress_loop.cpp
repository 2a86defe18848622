#include "runtime/progress_loop.hpp"

#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/futex.hpp"

namespace sparcoll::runtime {

namespace {
// Empty rounds before an event-mode thread arms its channel and sleeps on it.
constexpr std::uint32_t kRoundsBeforeEventSleep = 64;
// Its sleep is bounded, for the handler's deadline checks.
constexpr int kEventSleepMs = 5;
}  // namespace

ProgressLoop::ProgressLoop(Handler& handler, std::uint64_t idle_spin_us, bool oversubscribed, bool event_mode)
    : handler_(handler), idle_(idle_spin_us, oversubscribed) {
  if (event_mode && handler.event_fd() >= 0) wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

ProgressLoop::~ProgressLoop() {
  stop();
  if (wake_fd_ >= 0) close(wake_fd_);
}

bool ProgressLoop::start(const char* name, int core) {
  thread_ = std::thread([this] { run(); });
  (void)pthread_setname_np(thread_.native_handle(), name);  // a name too long is refused, not cut: still runs
  if (core < 0) return true;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(core, &set);
  return pthread_setaffinity_np(thread_.native_handle(), sizeof set, &set) == 0;
}

void ProgressLoop::stop() {
  if (!thread_.joinable()) return;
  stop_.store(true, std::memory_order_release);
  notify();
  thread_.join();
}

void ProgressLoop::notify() noexcept {
  wake_.fetch_add(1, std::memory_order_release);
  futex_wake(&wake_);
  if (wake_fd_ >= 0) (void)eventfd_write(wake_fd_, 1);
}

void ProgressLoop::run() {
  while (!stop_.load(std::memory_order_acquire)) {
    // Read before the round: a submission during it changes wake_, and the sleep below ends.
    const std::uint32_t seen = wake_.load(std::memory_order_acquire);
    if (handler_.step()) {
      idle_.moved();
      armed_ = false;
      continue;
    }
    const std::uint32_t rounds = idle_.empty_round();
    if (wake_fd_ >= 0 && rounds > kRoundsBeforeEventSleep) {
      event_wait();
      continue;
    }
    idle_.wait(handler_.idle(), &wake_, seen);
  }
  handler_.stopped();
}

// Event mode: once nothing happened for a while, arm the channel, run one more round (the loop
// does that), and if it was empty too, sleep on the channel's descriptor and the submission
// eventfd. Queued sends keep the thread polling: their progress (and rdma credits, which arrive
// as writes without completions) raises no event.
void ProgressLoop::event_wait() {
  if (handler_.must_poll()) {
    sched_yield();
    return;
  }
  if (!armed_) {
    handler_.arm();
    armed_ = true;
    return;
  }
  struct pollfd fds[2] = {{handler_.event_fd(), POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  (void)::poll(fds, 2, kEventSleepMs);
  eventfd_t drained;
  if (fds[1].revents & POLLIN) (void)eventfd_read(wake_fd_, &drained);
  armed_ = false;
  handler_.slept();
}

}  // namespace sparcoll::runtime
