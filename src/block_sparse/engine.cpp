#include "block_sparse/engine.hpp"

#include <algorithm>
#include <cstdio>
#include <thread>

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
      peers_need_polls_(!engine.config().layout.self_is_worker() ||
                        (channel != nullptr && channel->acknowledges_when_polled())),
      loopback_(engine.config().layout.self, std::size_t{64} << 20),
      outbox_(engine.config().layout.self, channel, &loopback_),
      aggregator_(aggregator_config(engine.config(), index, this), outbox_),
      worker_(worker_config(engine.config(), index), outbox_),
      submissions_(op_slot_count(engine.config().options.max_inflight)),
      handovers_(op_slot_count(engine.config().options.max_inflight)),
      loop_(*this, engine.config().options.idle_spin_us, engine.config().yield_when_waiting,
            engine.config().options.poll_mode == "event") {
  active_.reserve(op_slot_count(engine.config().options.max_inflight));
  releasing_.reserve(op_slot_count(engine.config().options.max_inflight));
  next_deadline_check_ = Clock::now();
}

ProgressThread::~ProgressThread() { stop(); }

void ProgressThread::start() {
  const auto& cores = engine_.config().options.pin_cores;
  const int core = index_ < cores.size() ? cores[index_] : -1;
  char name[16];
  std::snprintf(name, sizeof name, "sc-progress-%u", index_ % 1000);
  if (!loop_.start(name, core)) SC_LOG_WARN("could not pin progress thread %u to core %d; it runs unpinned", index_, core);
}

void ProgressThread::stop() { loop_.stop(); }

void ProgressThread::submit(OpState* op) {
  while (!submissions_.push(op)) std::this_thread::yield();  // cannot stay full: one entry per op slot
  loop_.notify();
}

void ProgressThread::hand_over(OpState* op) {
  while (!handovers_.push(op)) std::this_thread::yield();  // one entry per op slot, like submit
  loop_.notify();
}

OpState* ProgressThread::find_local_op(void* thread, std::uint32_t op_id) {
  return static_cast<ProgressThread*>(thread)->find_op(op_id);
}

OpState* ProgressThread::find_op(std::uint32_t op_id) {
  for (OpState* op : active_)
    if (op->op_id == op_id) return op;
  return nullptr;
}

// While an op runs (or its sends wait for room) the loop spins and yields; with nothing in
// flight it spins for SPARCOLL_IDLE_SPIN_US after the last activity, because the next op usually
// follows at once, then sleeps (runtime/idle_policy.hpp). A worker's thread sleeps until its
// process submits again: a faster peer's first windows of the next op can wait in the channel,
// since no lane here completes a round without this process's own windows. A dedicated
// aggregator (it never submits) and a channel whose peers wait for its acknowledgements (dpdk)
// nap briefly instead.
runtime::Idle ProgressThread::idle() {
  const bool outstanding = !active_.empty() || worker_.has_pending_sends() || aggregator_.has_pending_sends();
  if (outstanding) return runtime::Idle{runtime::Waiting::op_in_flight, nullptr};
  return runtime::Idle{peers_need_polls_ || must_poll() ? runtime::Waiting::nothing : runtime::Waiting::submission,
                       nullptr};
}

int ProgressThread::event_fd() const { return channel_ != nullptr ? channel_->wait_fd() : -1; }

// Queued sends keep the thread polling: their progress (and rdma credits, which arrive as
// writes without completions) raises no event.
bool ProgressThread::must_poll() {
  return worker_.has_pending_sends() || aggregator_.has_pending_sends() || !releasing_.empty() ||
         !loopback_.empty() || (channel_ != nullptr && !channel_->flushed());
}

void ProgressThread::arm() { channel_->arm(); }

void ProgressThread::slept() { rounds_ |= 255; }  // the next step reads the clock: deadlines after every sleep

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
  // Read before the slot is released: the calling thread may reuse it at once and clear it.
  const Status status = op->failed.load(std::memory_order_acquire) ? op->error : Status();
  const bool wake_raw = op->wake_raw;
  detail::release_slot(op->busy);
  detail::complete(*request, status, wake_raw);
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

Engine::Engine(EngineConfig config, transport::Driver* driver)
    : config_(std::move(config)), ops_(config_.options.max_inflight) {
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
