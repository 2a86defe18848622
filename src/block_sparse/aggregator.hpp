// The aggregator side of block-sparse streaming aggregation (docs/protocol.md).
//
// One Aggregator per progress thread, serving the lanes this process aggregates on that thread.
// Per op and lane it runs rounds: it waits for a window from every worker whose advertised next
// block is the round's cursor, stages their blocks, and when the round is complete reduces every
// staged block below M = min(next over workers) in rank order (so every rank gets bitwise the same
// result, whatever the arrival order) and sends the result with next = M to every worker.
// Blocks zero on every worker are never sent by anyone.
//
// Ops map to 2 x max_inflight slots: a worker starts op X + max_inflight only after op X finished
// for it, so op X's slot here may still be sending to slower workers; the doubling keeps the two
// apart (docs/protocol.md, "slots").
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "block_sparse/layout.hpp"
#include "block_sparse/op_state.hpp"
#include "block_sparse/outbox.hpp"
#include "proto/wire.hpp"
#include "sparcoll/options.hpp"

namespace sparcoll::block_sparse {

struct AggregatorConfig {
  block_sparse::JobLayout layout;
  std::uint32_t thread_index = 0;
  std::uint32_t job_epoch = 0;
  std::uint32_t max_inflight = 4;
  std::uint32_t fusion = 8;       // window capacity (block_sparse::window_capacity)
  std::uint32_t block_elems = 256;
  std::uint32_t max_message = 65536;
  std::uint32_t deadline_ms = 60000;
  // Co-located mode: finds this process's own worker state of an op (it runs on the same
  // thread), so local blocks are read from, and results written to, the user's buffers directly
  // instead of being copied through the loopback. Null for dedicated aggregators.
  block_sparse::OpState* (*find_local_op)(void* context, std::uint32_t op_id) = nullptr;
  void* find_local_context = nullptr;
};

class Aggregator {
 public:
  Aggregator(const AggregatorConfig& config, block_sparse::Outbox& outbox);
  ~Aggregator();
  Aggregator(const Aggregator&) = delete;
  Aggregator& operator=(const Aggregator&) = delete;

  // A window or abort from a worker. A non-ok status is a protocol violation by the sender
  // (the caller treats the connection as failed); mismatches between workers are not errors
  // here: they fail the lane and every worker is told.
  Status on_message(const proto::MessageView& m);
  // Resends what the channel refused earlier. Non-ok only for a hard send error.
  Status retry_sends();
  // Fails lanes stalled past the deadline, naming the workers they wait for.
  Status check_deadlines(block_sparse::Clock::time_point now);
  // The job failed (a peer died, a deadline passed): fail every active lane, telling the workers
  // still reachable, with the original code and reason.
  void fail_all(const Status& reason);
  bool has_pending_sends() const noexcept { return !retry_.empty(); }
  std::uint32_t lanes_served() const noexcept { return static_cast<std::uint32_t>(my_lanes_.size()); }

 private:
  struct Lane;
  struct Slot;

  Status on_window(Slot& slot, Lane& lane, const proto::MessageView& m);
  Status stage(Slot& slot, Lane& lane, std::uint32_t w, const proto::MessageView& m);
  void unborrow(Slot& slot, Lane& lane);
  // A lane's staging and result buffers, made the first time the lane is used in its slot.
  void ensure_buffers(Lane& lane);
  Status try_emit(Slot& slot, Lane& lane);
  void reduce_round(Slot& slot, Lane& lane, std::uint64_t limit);
  void begin_failure(Lane& lane, ErrorCode code, std::string reason);
  void build_error(Slot& slot, Lane& lane);
  Status start_sending(Slot& slot, Lane& lane);
  Status pump(Slot& slot, Lane& lane);
  void finish_lane(Slot& slot, Lane& lane);
  void init_slot(Slot& slot, std::uint32_t op_id);
  Status violation(std::uint32_t sender, const proto::MessageView& m, const std::string& what) const;

  AggregatorConfig cfg_;
  block_sparse::Outbox& outbox_;
  std::uint32_t workers_;
  std::vector<std::uint32_t> my_lanes_;   // global lane numbers served here
  std::vector<std::int32_t> local_index_; // global lane -> index in my_lanes_, or -1
  std::vector<Slot> slots_;
  struct Pending {
    Slot* slot;
    Lane* lane;
  };
  std::vector<Pending> retry_;            // lanes whose sends hit back-pressure
  std::vector<Pending> retrying_;         // the list being retried (capacity reused)
  std::vector<float> acc_;                // one block of accumulator (fp32 / int32 bits)
  std::vector<std::int64_t> acc64_;       // one block of i32 avg's exact accumulator
  std::vector<struct iovec> iov_;         // one result message: header, indices, one entry per block
  // Staging and result buffers (staged_data, out_data) of finished lanes, handed to the next lane
  // that needs them: the working set is the lanes in flight, not every lane of every op slot.
  std::vector<std::pair<std::vector<std::byte>, std::vector<std::byte>>> spare_buffers_;
};

}  // namespace sparcoll::block_sparse
