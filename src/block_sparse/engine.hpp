// The progress engine: one ProgressThread (progress thread) per SPARCOLL_THREADS, each owning one driver
// channel, a loopback, the worker side of its lanes and the aggregator side of the lanes this
// process aggregates. Each is a handler of the progress runtime (runtime/progress_loop.hpp),
// whose loop runs its rounds (poll, dispatch, reduce, send) with no locks on the data path; the
// calling thread hands them ops through SPSC queues.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "block_sparse/aggregator.hpp"
#include "block_sparse/block_sparse_worker.hpp"
#include "block_sparse/layout.hpp"
#include "block_sparse/op_state.hpp"
#include "block_sparse/outbox.hpp"
#include "block_sparse/self_channel.hpp"
#include "common/spsc_queue.hpp"
#include "runtime/op_slots.hpp"
#include "runtime/progress_loop.hpp"
#include "sparcoll/options.hpp"
#include "transport/driver.hpp"
#include "transport/published_counters.hpp"

namespace sparcoll::block_sparse {

struct EngineConfig {
  JobLayout layout;
  Options options;
  std::uint32_t job_epoch = 0;
  std::uint32_t window_capacity = 1;
  bool yield_when_waiting = false;  // more busy threads than cores on this host
};

class Engine;

class ProgressThread final : public runtime::Handler {
 public:
  ProgressThread(Engine& engine, std::uint32_t index, transport::Channel* channel);
  ~ProgressThread();
  void start();
  void stop();
  // Calling thread: hand over an op (never fails: the queue holds max_inflight entries).
  void submit(OpState* op);
  // The same from the collective thread (the block-sparse part of a hybrid allreduce), through a
  // queue of its own: each queue has one producer.
  void hand_over(OpState* op);
  std::uint32_t worker_lanes() const noexcept { return worker_.lanes_here(); }
  void add_traffic(TrafficStats* total) const noexcept;
  // Adds its channel's own counters, by name (any thread).
  void add_counters(std::vector<transport::NamedCounter>* totals) const { channel_counters_.add_to(totals); }
  // For the co-located aggregator: this process's own worker state of an op, or null.
  static OpState* find_local_op(void* thread, std::uint32_t op_id);

 private:
  // runtime::Handler: one round, what an empty one waits for, event mode.
  bool step() override;
  runtime::Idle idle() override;
  int event_fd() const override;
  bool must_poll() override;
  void arm() override;
  void slept() override;
  void dispatch(const transport::ReceivedMessage& msg);
  void start_op(OpState* op);
  void maybe_finish(OpState* op);
  void fail_everything(const Status& reason);
  void check_deadlines(Clock::time_point now);
  OpState* find_op(std::uint32_t op_id);

  Engine& engine_;
  std::uint32_t index_;
  transport::Channel* channel_;  // null when the job has a single process
  // Peers need this thread's polls even while nothing runs here: a dedicated aggregator (its
  // process never submits) or a channel that owes acknowledgements (dpdk). Fixed for its life.
  const bool peers_need_polls_;
  SelfChannel loopback_;
  Outbox outbox_;
  block_sparse::Aggregator aggregator_;
  block_sparse::BlockSparseWorker worker_;
  SpscQueue<OpState*> submissions_;
  SpscQueue<OpState*> handovers_;  // from the collective thread
  std::vector<OpState*> active_;  // ops running on this progress thread, oldest first
  // Ops whose lanes are done but whose zero-copy sends may still read the user's buffer: they
  // complete once the channel says that memory is released.
  std::vector<OpState*> releasing_;
  void finish_released_ops();
  bool failed_ = false;           // this progress thread has seen the engine break
  Clock::time_point next_deadline_check_;
  std::uint64_t rounds_ = 0;
  // The channel's own counters, copied here by this progress thread (a channel is single-
  // threaded; add_counters() reads them from any thread).
  void publish_channel_counters() noexcept;
  transport::PublishedCounters channel_counters_;
  std::atomic<std::uint64_t> bytes_received_{0};
  std::atomic<std::uint64_t> messages_received_{0};
  runtime::ProgressLoop loop_;  // last: its thread stops before the rest goes
};

class Engine {
 public:
  Engine(EngineConfig config, transport::Driver* driver);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  void start();
  void stop();

  const EngineConfig& config() const noexcept { return config_; }
  std::uint32_t thread_count() const noexcept { return static_cast<std::uint32_t>(progress_threads_.size()); }
  // The op slots (runtime/op_slots.hpp), by op id.
  runtime::OpSlots<OpState>& slots() noexcept { return ops_; }
  OpState& slot(std::uint32_t op_id) { return ops_[op_id]; }
  // Calling thread: hand a prepared op to every progress thread.
  void submit(OpState* op);
  // Collective thread: the same (the block-sparse part of a hybrid allreduce, whose op slot the
  // calling thread reserved).
  void hand_over(OpState* op);

  // Failure that leaves the communicator unusable (peer death, timeout, protocol violation).
  void break_with(const Status& reason);
  bool broken() const noexcept { return broken_.load(std::memory_order_acquire); }
  Status broken_status() const;
  TrafficStats traffic() const noexcept;
  // The channels' own counters (transport/driver.hpp: ChannelCounters), summed by name.
  void add_counters(std::vector<transport::NamedCounter>* totals) const;

 private:
  friend class ProgressThread;
  void prepare_for_threads(OpState* op);
  EngineConfig config_;
  runtime::OpSlots<OpState> ops_;
  std::vector<std::unique_ptr<ProgressThread>> progress_threads_;
  std::atomic<bool> broken_{false};
  mutable std::mutex broken_mutex_;  // taken on failure only
  Status broken_status_;
};

}  // namespace sparcoll::block_sparse
