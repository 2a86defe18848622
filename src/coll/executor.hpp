// The collective thread: runs the peer-to-peer collectives (ring, butterfly, SparCML, broadcast,
// allgather, reduce-scatter, ...) one after another, in the order the calling thread issued
// them, on the driver's collective channel. It is a handler of the progress runtime
// (runtime/progress_loop.hpp): each round it steps the running collective, a coroutine over
// Peers (common/task.hpp), or starts the next one, or serves the channel between collectives. Block-sparse allreduce runs on the block-sparse progress threads
// instead; the two streams are independent (each is ordered the same way on every rank).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "algo/p2p_algorithms.hpp"
#include "algo/plan_reuse.hpp"
#include "coll/coll_op.hpp"
#include "p2p/peers.hpp"
#include "common/spsc_queue.hpp"
#include "common/task.hpp"
#include "runtime/op_slots.hpp"
#include "runtime/progress_loop.hpp"
#include "sparcoll/options.hpp"
#include "transport/published_counters.hpp"

namespace sparcoll::block_sparse {
class Engine;
}

namespace sparcoll::coll {

using p2p::collective_signature;
using p2p::Mailbox;
using p2p::Peers;
using Clock = std::chrono::steady_clock;

class Executor final : public runtime::Handler {
 public:
  // `channel` is null for a single-worker job. `engine` learns of failures that break the
  // communicator (a dead peer, a timeout, a corrupt message).
  Executor(transport::Channel* channel, std::uint32_t rank, std::uint32_t size, const Options& options,
           bool yield_when_waiting, block_sparse::Engine* engine);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Calling thread: a free op slot for the next collective (waits while max_inflight run).
  CollOp& next_slot();
  // Calling thread: starts the op returned by next_slot() (fields filled in).
  void submit(CollOp& op);
  // Calling thread: whether run_here() would take an op now: no earlier collective is queued
  // or running, and the channel may be driven from this thread.
  bool can_run_here() const;
  // Calling thread: runs the op returned by next_slot() right here, to completion, instead of
  // handing it to the collective thread (which waits meanwhile). For small collectives, whose
  // two thread hand-offs (wake the collective thread, wake the caller) cost more than the
  // transfers on a busy 2-core host. Only when can_run_here().
  void run_here(CollOp& op);
  // Calling thread: waits until every submitted collective finished (teardown). The collective
  // thread keeps serving the channel until destruction, so peers still finishing their last
  // collective get what they need from this rank (acknowledgements) during the teardown barrier.
  void drain();
  // Adds the collective channel's traffic so far (any thread).
  void add_traffic(TrafficStats* total) const noexcept;
  // Adds the collective channel's own counters, by name (any thread).
  void add_counters(std::vector<transport::NamedCounter>* totals) const { channel_counters_.add_to(totals); }

 private:
  // runtime::Handler: one round (step the running collective, start the next, or serve the
  // channel), what an empty one waits for, and the end.
  bool step() override;
  runtime::Idle idle() override;
  void stopped() override;
  // The collective thread's collective in progress: started, stepped, finished.
  void start_collective(CollOp& op);
  bool step_collective();
  void finish_task();
  void finish_collective(const Status& status);
  // Runs op to its end on the calling thread (run_here), its failure handled.
  Status run_one(CollOp& op);
  // A collective's failure: tells the peers, and forgets it or breaks the communicator.
  Status handle_failure(const CollOp& op, Status status);
  Status out_of_memory(const CollOp& op) const;
  // Publishes op's result and frees its slot.
  void complete(CollOp& op, const Status& status);
  // Who drives peers_: nobody, the collective thread, or the calling thread (run_here).
  enum Driver : std::uint32_t { kNobody = 0, kCollectiveThread = 1, kCallingThread = 2 };
  bool take_peers(std::uint32_t who) noexcept {
    std::uint32_t free = kNobody;
    return peers_owner_.compare_exchange_strong(free, who, std::memory_order_acquire);
  }
  void release_peers() noexcept { peers_owner_.store(kNobody, std::memory_order_release); }
  // The op as a coroutine over peers_ (common/task.hpp), which run_one drives (p2p/drive.hpp).
  Task execute(CollOp& op);
  Task allreduce(Algorithm algo, const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op);
  Task exact_i32_avg(Algorithm algo, const void* send, void* recv, std::size_t count);
  Task exact_i32_avg_reduce(const CollOp& op);
  // hybrid_allreduce.cpp: the stripes' plan, the block-sparse half handed to the engine, the
  // dense half run here.
  Task hybrid_allreduce(CollOp& op, algo::KeptPlan kept);
  algo::KeptPlan kept_plan(const CollOp& op);
  Task exchange_stripe_masks(CollOp& op);
  void remember_result(const CollOp& op, bool exchanged);
  Task hybrid_whole_tensor(CollOp& op, bool block_rd);
  void count_union_blocks(const CollOp& op);
  Task hybrid_striped(CollOp& op, const std::vector<std::uint64_t>* kept_dense, const std::uint32_t* counts);
  std::shared_ptr<detail::RequestState> hand_over_sparse_stripes(CollOp& op);
  Task run_dense_stripes(const CollOp& op);
  Task wait_for_sparse_stripes(detail::RequestState& sparse_done, Status status);
  Task dense_part(const CollOp& op, std::size_t begin, std::size_t end);
  // The reserved op slot of a hybrid allreduce whose block-sparse half never went to the engine
  // (all stripes dense, invalid arguments, a broken communicator) is given back.
  void release_unused_sparse_part(CollOp& op);

  Peers peers_;
  Options options_;
  block_sparse::Engine* engine_;
  runtime::OpSlots<CollOp> slots_;
  std::uint32_t next_slot_ = 0;  // submissions so far: the slot ring's position
  std::uint32_t next_seq_ = 0;   // collectives so far (send and recv take no sequence number)
  // Hands a send or recv to the mailbox and frees its slot (it completes there later).
  void post_p2p(CollOp& op);
  // The mailbox's traffic, published for add_traffic (read from any thread).
  void publish_p2p_traffic() noexcept;
  std::atomic<std::uint64_t> p2p_bytes_sent_{0}, p2p_bytes_received_{0}, p2p_messages_sent_{0},
      p2p_messages_received_{0};
  SpscQueue<CollOp*> queue_;
  std::atomic<std::uint32_t> peers_owner_{kNobody};
  std::atomic<std::uint32_t> ran_here_{0};  // collectives run_here() ran so far
  std::uint32_t ran_here_seen_ = 0;         // ... as of the collective thread's last look
  runtime::Idle idle_;                      // what the last round, if empty, waits for
  CollOp* current_ = nullptr;               // the collective thread's collective in progress
  std::optional<Task> task_;                // ... as a coroutine
  bool any_thread_ = false;  // the channel may be driven by the calling thread
  algo::Scratch scratch_;
  std::vector<std::int32_t> halves_;  // exact_i32_avg: the 16-bit halves, then their sums
  std::vector<std::uint32_t> stripe_table_;  // hybrid: every rank's non-zero blocks per stripe
  std::vector<std::uint32_t> mask_counts_;   // hybrid: stripe_table_'s masks as counts
  algo::PlanReuse plan_reuse_;               // hybrid: what later calls of a shape plan from
  std::vector<std::uint64_t> dense_plan_;     // hybrid: the stripes this call sends dense (bit per stripe)
  std::vector<std::uint32_t> result_counts_;  // hybrid: the result's non-zero blocks per stripe
  bool engine_counted_ = false;               // the engine fills result_counts_ of the block-sparse stripes
  bool in_stripes_ = false;                   // hybrid: this call went in stripes
  bool union_counted_ = false;                // hybrid: result_counts_ counted in block recursive doubling's union
  std::vector<std::uint64_t> next_plan_;      // hybrid: the plan its result calls for (follow_result)
  // hybrid: whole_tensor_dense_union_percent for...
  std::uint32_t whole_high_ = 0;
  std::uint32_t whole_high_for_ = ~0u;         // ...this rd_max_percent (none yet)
  bool whole_high_against_stripes_ = false;   // ...and stripes_unless_rd
  std::vector<std::uint64_t> signed_zero_;   // hybrid: scratch of its in-place scans
  OpStats hybrid_stats_;                     // hybrid: its block-sparse half's traffic
  algo::CompressScratch compress_scratch_;
  std::atomic<std::uint64_t> bytes_sent_{0}, bytes_received_{0}, messages_sent_{0}, messages_received_{0};
  // The collective channel's packet counters as of the last collective (packet transports).
  transport::PublishedCounters channel_counters_;  // the collective channel's own counters
  runtime::ProgressLoop loop_;  // last: its thread stops before the rest goes
};

}  // namespace sparcoll::coll
