#include "common/futex.hpp"
#include "block_sparse/engine.hpp"

#include <algorithm>

#include <linux/futex.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>

#include "common/failure_scope.hpp"
#include "common/log.hpp"
#include "block_sparse/limits.hpp"
#include "proto/wire.hpp"

namespace sparcoll::block_sparse {

namespace {
constexpr int kPollBatch = 64;

block_sparse::AggregatorConfig aggregator_config(const EngineConfig& c, std::uint32_t thread_index, ProgressThread* self) {
  block_sparse::AggregatorConfig a;
  if (c.layout.dedicated == 0 && c.layout.self_is_worker()) {
    a.find_local_op = &ProgressThread::find_local_op;
    a.find_local_context = self;
  }
  a.layout = c.layout;
  a.thread_index = thread_index;
  a.job_epoch = c.job_epoch;
  a.max_inflight = c.options.max_inflight;
  a.fusion = c.window_capacity;
  a.block_elems = c.options.block_elems;
  a.max_message = c.options.max_message;
  a.deadline_ms = c.options.deadline_ms;
  return a;
}

block_sparse::WorkerConfig worker_config(const EngineConfig& c, std::uint32_t thread_index) {
  block_sparse::WorkerConfig w;
  w.layout = c.layout;
  w.thread_index = thread_index;
  w.job_epoch = c.job_epoch;
  w.fusion = c.window_capacity;
  return w;
}
}  // namespace

// ---------------------------------------------------------------------------------------------
// ProgressThread

ProgressThread::ProgressThread(Engine& engine, std::uint32_t index, transport::Channel* channel)
    : engine_(engine),
      index_(index),
      channel_(channel),
      loopback_(engine.config().layout.self, std::size_t{64} << 20),
      outbox_(engine.config().layout.self, channel, &loopback_),
      aggregator_(aggregator_config(engine.config(), index, this), outbox_),
      worker_(worker_config(engine.config(), index), outbox_),
      submissions_(op_slot_count(engine.config().options.max_inflight)),
      handovers_(op_slot_count(engine.config().options.max_inflight)) {
  active_.reserve(op_slot_count(engine.config().options.max_inflight));
  releasing_.reserve(op_slot_count(engine.config().options.max_inflight));
  if (engine.config().options.poll_mode == "event" && channel_ != nullptr && channel_->wait_fd() >= 0) {
    wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    event_mode_ = wake_fd_ >= 0;
  }
}

ProgressThread::~ProgressThread() {
  stop();
  if (wake_fd_ >= 0) close(wake_fd_);
}

void ProgressThread::start() {
  thread_ = std::thread([this] { run(); });
  const auto& cores = engine_.config().options.pin_cores;
  if (index_ < cores.size()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cores[index_], &set);
    if (pthread_setaffinity_np(thread_.native_handle(), sizeof set, &set) != 0)
      SC_LOG_WARN("could not pin progress thread %u to core %d; it runs unpinned", index_, cores[index_]);
  }
}

void ProgressThread::stop() {
  if (!thread_.joinable()) return;
  stop_.store(true, std::memory_order_release);
  wake_.fetch_add(1, std::memory_order_release);
  futex_wake(&wake_);
  if (wake_fd_ >= 0) (void)eventfd_write(wake_fd_, 1);
  thread_.join();
}

void ProgressThread::submit(OpState* op) {
  while (!submissions_.push(op)) std::this_thread::yield();  // cannot stay full: one entry per op slot
  wake_.fetch_add(1, std::memory_order_release);
  futex_wake(&wake_);
  if (wake_fd_ >= 0) (void)eventfd_write(wake_fd_, 1);
}

void ProgressThread::hand_over(OpState* op) {
  while (!handovers_.push(op)) std::this_thread::yield();  // one entry per op slot, like submit
  wake_.fetch_add(1, std::memory_order_release);
  futex_wake(&wake_);
  if (wake_fd_ >= 0) (void)eventfd_write(wake_fd_, 1);
}

OpState* ProgressThread::find_local_op(void* thread, std::uint32_t op_id) {
  return static_cast<ProgressThread*>(thread)->find_op(op_id);
}

OpState* ProgressThread::find_op(std::uint32_t op_id) {
  for (OpState* op : active_)
    if (op->op_id == op_id) return op;
  return nullptr;
}

void ProgressThread::run() {
  // Starts as if already idle: the spin window opens at the first idle round after activity
  // (idle_rounds == 1), so until the first activity the progress thread sleeps instead of spinning. A
  // job's first collectives are often small ones that never reach the progress threads (they run in the
  // calling thread), and two progress threads spinning after setup on 2 cores made those 3-10x slower.
  std::uint32_t idle_rounds = 1;
  next_deadline_check_ = Clock::now();
  while (!stop_.load(std::memory_order_acquire)) {
    if (step()) {
      idle_rounds = 0;
      armed_ = false;
      continue;
    }
    ++idle_rounds;
    if (event_mode_ && idle_rounds > 64) {
      event_wait();
      continue;
    }
    const bool outstanding = !active_.empty() || worker_.has_pending_sends() || aggregator_.has_pending_sends();
    idle_wait(idle_rounds, outstanding);
  }
}

// Back-off when nothing arrived. While an op runs: spin (yield each round when threads
// outnumber cores). With nothing in flight: keep spinning/yielding for kIdleSpin after the last
// activity, because the next op usually follows at once and a remote rank may already be
// sending its first windows; then sleep in short futex waits that a local submission cuts
// short. The sleep is short because a remote op cannot wake us.
// Event mode: once nothing happened for a while, arm the channel, poll once more (the loop does
// that), and if that poll was empty too, sleep on the channel's descriptor and the submission
// eventfd. Queued sends keep the thread polling: their progress (and rdma credits, which arrive
// as writes without completions) raises no event. The sleep is bounded for deadline checks.
void ProgressThread::event_wait() {
  const bool sends_waiting = worker_.has_pending_sends() || aggregator_.has_pending_sends() || !releasing_.empty() ||
                             !loopback_.empty() || !channel_->flushed();
  if (sends_waiting) {
    sched_yield();
    return;
  }
  if (!armed_) {
    channel_->arm();
    armed_ = true;
    return;
  }
  struct pollfd fds[2] = {{channel_->wait_fd(), POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  (void)::poll(fds, 2, 5);
  eventfd_t drained;
  if (fds[1].revents & POLLIN) (void)eventfd_read(wake_fd_, &drained);
  armed_ = false;
  rounds_ |= 255;  // the next step reads the clock: deadlines are checked after every sleep
}

void ProgressThread::idle_wait(std::uint32_t idle_rounds, bool work_outstanding) {
  const auto kIdleSpin = std::chrono::microseconds(engine_.config().options.idle_spin_us);
  if (work_outstanding) {
    if (engine_.config().yield_when_waiting || idle_rounds > 4096) sched_yield();
    return;
  }
  if (idle_rounds == 1) {
    idle_since_ = Clock::now();
    spinning_ = true;
  }
  if (spinning_) {
    // The clock is read every 64th round; once the window is over, every round sleeps (it
    // used to spin 63 rounds between sleeps: an idle communicator burned 20% of a core per
    // rank on 2 cores, time a training step's compute lost).
    if ((idle_rounds & 63) != 0 || Clock::now() - idle_since_ < kIdleSpin) {
      if (engine_.config().yield_when_waiting || idle_rounds > 256) sched_yield();
      return;
    }
    spinning_ = false;
  }
  // Short naps, since a remote op cannot wake us; after a second of nothing (a long compute
  // phase) longer ones: 20000 wake-ups a second cost an idle rank ~10% of a core.
  const bool long_idle = Clock::now() - idle_since_ > std::chrono::seconds(1);
  futex_wait_for(&wake_, wake_.load(std::memory_order_acquire), long_idle ? 500'000 : 50'000);
}

bool ProgressThread::step() {
  bool progressed = false;
  if (engine_.broken() && !failed_) fail_everything(engine_.broken_status());

  OpState* op = nullptr;
  while (submissions_.pop(&op) || handovers_.pop(&op)) {
    start_op(op);
    progressed = true;
  }

  transport::ReceivedMessage msgs[kPollBatch];
  if (channel_ != nullptr && !failed_) {
    const int n = channel_->poll(msgs, kPollBatch);
    if (n < 0) {
      engine_.break_with(channel_->error());
      fail_everything(engine_.broken_status());
      return true;
    }
    if (n > 0) {
      std::uint64_t bytes = 0;
      for (int i = 0; i < n; ++i) bytes += msgs[i].size;
      bytes_received_.store(bytes_received_.load(std::memory_order_relaxed) + bytes, std::memory_order_relaxed);
      messages_received_.store(messages_received_.load(std::memory_order_relaxed) + static_cast<std::uint64_t>(n),
                               std::memory_order_relaxed);
    }
    for (int i = 0; i < n && !failed_; ++i) dispatch(msgs[i]);
    progressed |= n > 0;
  }
  const int n = loopback_.poll(msgs, kPollBatch);
  for (int i = 0; i < n && !failed_; ++i) dispatch(msgs[i]);
  progressed |= n > 0;

  if (!releasing_.empty()) finish_released_ops();

  if (!failed_) {
    Status s = worker_.retry_sends();
    if (s.ok()) s = aggregator_.retry_sends();
    if (!s.ok()) {
      engine_.break_with(s);
      fail_everything(engine_.broken_status());
    }
  }

  // Deadlines are checked every 256 rounds: reading the clock every round costs more than the
  // rest of an empty round.
  if ((++rounds_ & 255) == 0) {
    const Clock::time_point now = Clock::now();
    if (now >= next_deadline_check_) {
      next_deadline_check_ = now + std::chrono::milliseconds(5);
      check_deadlines(now);
      publish_channel_counters();
    }
  }
  return progressed;
}

void ProgressThread::dispatch(const transport::ReceivedMessage& msg) {
  const JobLayout& layout = engine_.config().layout;
  proto::MessageView view;
  const proto::DecodeError e = proto::decode(msg.data, msg.size, layout.processes(), &view);
  Status s;
  if (e != proto::DecodeError::none) {
    s = Status(ErrorCode::protocol_error, "dropped a message from " + layout.name(msg.peer) + " on thread " +
                                              std::to_string(index_) + ": " + proto::describe(e));
  } else if (view.header->sender != msg.peer) {
    s = Status(ErrorCode::protocol_error, layout.name(msg.peer) + " sent a message claiming to come from " +
                                              layout.name(view.header->sender));
  } else if ((view.header->flags & proto::kFlagLocalData) && msg.peer != layout.self) {
    s = Status(ErrorCode::protocol_error, layout.name(msg.peer) + " sent a message whose blocks are said to be local");
  } else if (view.header->job_epoch != engine_.config().job_epoch) {
    s = Status(ErrorCode::protocol_error, layout.name(msg.peer) + " sent a message of another job (epoch " +
                                              std::to_string(view.header->job_epoch) + ")");
  } else {
    const auto type = static_cast<proto::MsgType>(view.header->type);
    if (type == proto::MsgType::window || type == proto::MsgType::abort) {
      s = aggregator_.on_message(view);
    } else {
      OpState* op = find_op(view.header->op_id);
      if (op == nullptr) {
        s = Status(ErrorCode::protocol_error, layout.name(msg.peer) + " sent a result for op " +
                                                  std::to_string(view.header->op_id) + ", which is not running here");
      } else {
        s = worker_.on_message(*op, view);
        const auto code = static_cast<ErrorCode>(view.header->status);
        if (s.ok() && type == proto::MsgType::error && !fails_only_the_collective(code)) {
          // A timeout or a dead peer elsewhere: the other processes' state for this op is lost,
          // so later ops could not line up either.
          engine_.break_with(Status(code == ErrorCode::ok ? ErrorCode::peer_failure : code,
                                    std::string(view.reason, view.reason_len)));
          fail_everything(engine_.broken_status());
          return;
        }
        maybe_finish(op);
      }
    }
  }
  if (!s.ok()) {
    SC_LOG_ERROR("%s", s.message().c_str());
    engine_.break_with(s);
    fail_everything(engine_.broken_status());
  }
}

void ProgressThread::start_op(OpState* op) {
  active_.push_back(op);
  if (failed_) {
    // Never started here: no lane is open, so none can be closed one by one.
    op->fail(engine_.broken_status());
    op->thread_lanes_left[index_] = 0;
  } else {
    Status s = worker_.start(*op);
    if (!s.ok()) {
      engine_.break_with(s);
      fail_everything(engine_.broken_status());
      return;
    }
  }
  maybe_finish(op);
}

// When this progress thread's lanes of `op` are all done, the last progress thread publishes the outcome.
void ProgressThread::maybe_finish(OpState* op) {
  if (op->thread_lanes_left[index_] != 0) return;
  if (op->user_memory.len != 0 && channel_ != nullptr && !failed_ && !channel_->user_memory_released()) {
    // The NIC may still read the send buffer; the caller must not get it back yet. (After a
    // failure nothing waits: the op fails, and registered pages stay pinned until evicted.)
    if (std::find(releasing_.begin(), releasing_.end(), op) == releasing_.end()) releasing_.push_back(op);
    return;
  }
  if (!releasing_.empty()) {
    auto it = std::find(releasing_.begin(), releasing_.end(), op);
    if (it != releasing_.end()) releasing_.erase(it);
  }
  for (std::size_t i = 0; i < active_.size(); ++i) {
    if (active_[i] == op) {
      active_.erase(active_.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  }
  if (op->threads_left.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  std::shared_ptr<RequestState> request = std::move(op->request);
  OpStats total;
  for (const OpStats& s : op->thread_stats) {
    total.bytes_sent += s.bytes_sent;
    total.bytes_received += s.bytes_received;
    total.blocks_sent += s.blocks_sent;
    total.blocks_received += s.blocks_received;
  }
  total.algorithm = Algorithm::block_sparse;
  request->stats = total;
  if (op->counted_stripe_blocks != 0) {
    const std::uint32_t stripes = op->counted_stripes;
    std::fill(op->stripe_results_out, op->stripe_results_out + stripes, 0u);
    for (std::size_t t = 0; t * stripes < op->stripe_results.size(); ++t)
      for (std::uint32_t s = 0; s < stripes; ++s) op->stripe_results_out[s] += op->stripe_results[t * stripes + s];
  }
  if (op->failed.load(std::memory_order_acquire)) request->status = op->error;
  // Read before the slot is released: the calling thread may reuse it at once and clear it.
  const bool wake_raw = op->wake_raw;
  // Release the slot first: the waiter may immediately start the next op in it.
  op->busy.store(0, std::memory_order_release);
  op->busy.notify_all();
  request->done.store(1, std::memory_order_release);
  request->done.notify_all();
  if (wake_raw) futex_wake(&request->done);
}

void ProgressThread::finish_released_ops() {
  if (!failed_ && !channel_->user_memory_released()) return;
  // Each call removes the op from releasing_.
  while (!releasing_.empty()) maybe_finish(releasing_.back());
}

void ProgressThread::fail_everything(const Status& reason) {
  if (failed_) return;
  failed_ = true;
  aggregator_.fail_all(reason);
  // Copy: maybe_finish edits active_.
  std::vector<OpState*> ops = active_;
  for (OpState* op : ops) {
    worker_.fail_lanes(*op, reason);
    maybe_finish(op);
  }
}

void ProgressThread::publish_channel_counters() noexcept {
  if (channel_ == nullptr) return;
  channel_counters_.publish(channel_->counters());
}

void ProgressThread::add_traffic(TrafficStats* total) const noexcept {
  total->bytes_sent += outbox_.bytes_sent();
  total->messages_sent += outbox_.messages_sent();
  total->bytes_received += bytes_received_.load(std::memory_order_relaxed);
  total->messages_received += messages_received_.load(std::memory_order_relaxed);
}

void ProgressThread::check_deadlines(Clock::time_point now) {
  if (failed_) return;
  Status s = aggregator_.check_deadlines(now);
  if (!s.ok()) {
    engine_.break_with(s);
    fail_everything(engine_.broken_status());
    return;
  }
  for (OpState* op : active_) {
    if (now < op->deadline) continue;
    const JobLayout& layout = engine_.config().layout;
    Status reason(ErrorCode::timeout, "op " + std::to_string(op->op_id) + " on " + layout.name(layout.self) +
                                          " passed its deadline of " +
                                          std::to_string(engine_.config().options.deadline_ms) +
                                          " ms (SPARCOLL_DEADLINE_MS): " + worker_.describe_wait(*op));
    SC_LOG_ERROR("%s", reason.message().c_str());
    engine_.break_with(reason);
    fail_everything(engine_.broken_status());
    return;
  }
}

// ---------------------------------------------------------------------------------------------
// Engine

Engine::Engine(EngineConfig config, transport::Driver* driver) : config_(std::move(config)) {
  const std::uint32_t k = op_slot_count(config_.options.max_inflight);
  ops_.reserve(k);
  for (std::uint32_t i = 0; i < k; ++i) ops_.push_back(std::make_unique<OpState>());
  const std::uint32_t t = config_.options.threads;
  for (std::uint32_t i = 0; i < t; ++i)
    progress_threads_.push_back(std::make_unique<ProgressThread>(*this, i, driver ? &driver->channel(i) : nullptr));
}

Engine::~Engine() { stop(); }

void Engine::start() {
  for (auto& s : progress_threads_) s->start();
}

void Engine::stop() {
  for (auto& s : progress_threads_) s->stop();
}

void Engine::submit(OpState* op) {
  prepare_for_threads(op);
  for (auto& s : progress_threads_) s->submit(op);
}

void Engine::hand_over(OpState* op) {
  prepare_for_threads(op);
  for (auto& s : progress_threads_) s->hand_over(op);
}

void Engine::prepare_for_threads(OpState* op) {
  op->thread_lanes_left.assign(progress_threads_.size(), 0);
  op->thread_stats.assign(progress_threads_.size(), OpStats{});
  for (std::size_t i = 0; i < progress_threads_.size(); ++i) op->thread_lanes_left[i] = progress_threads_[i]->worker_lanes();
  op->threads_left.store(static_cast<std::uint32_t>(progress_threads_.size()), std::memory_order_relaxed);
  op->busy.store(1, std::memory_order_release);
}

void Engine::break_with(const Status& reason) {
  std::lock_guard<std::mutex> lock(broken_mutex_);
  if (broken_.load(std::memory_order_relaxed)) return;
  broken_status_ = reason;
  broken_.store(true, std::memory_order_release);
}

TrafficStats Engine::traffic() const noexcept {
  TrafficStats total;
  for (const auto& s : progress_threads_) s->add_traffic(&total);
  return total;
}

void Engine::add_counters(std::vector<transport::NamedCounter>* totals) const {
  for (const auto& s : progress_threads_) s->add_counters(totals);
}

Status Engine::broken_status() const {
  std::lock_guard<std::mutex> lock(broken_mutex_);
  return broken_status_;
}

}  // namespace sparcoll::block_sparse
