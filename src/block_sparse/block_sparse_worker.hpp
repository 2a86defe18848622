// The worker side of block-sparse streaming aggregation (docs/protocol.md).
//
// Per lane a worker sends windows: up to `fusion` of its next non-zero blocks of the lane plus
// the index of the non-zero block after them (its look-ahead pointer). The first window always
// goes out (possibly empty) so the aggregator learns the pointer. Each result carries reduced
// blocks and, in its final message of a round, the global next block M: a worker whose pointer
// equals M sends its next window; the others send nothing. A worker never sends a zero block,
// and receives every block that is non-zero on some worker.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <string>
#include <vector>

#include "block_sparse/layout.hpp"
#include "block_sparse/op_state.hpp"
#include "block_sparse/outbox.hpp"
#include "proto/wire.hpp"

namespace sparcoll::block_sparse {

struct WorkerConfig {
  block_sparse::JobLayout layout;
  std::uint32_t thread_index = 0;
  std::uint32_t job_epoch = 0;
  std::uint32_t fusion = 8;  // window capacity (block_sparse::window_capacity)
};

class BlockSparseWorker {
 public:
  BlockSparseWorker(const WorkerConfig& config, block_sparse::Outbox& outbox);

  // Bytes of per-lane scratch an OpState needs (header + window indices).
  static std::size_t scratch_per_lane(std::uint32_t fusion) { return sizeof(proto::WireHeader) + 8 * std::size_t{fusion}; }

  // Starts `op` on this thread's lanes (first windows, or aborts). Non-ok on a hard send error.
  Status start(block_sparse::OpState& op);
  // A result or error from an aggregator. Non-ok is a protocol violation by the sender.
  Status on_message(block_sparse::OpState& op, const proto::MessageView& m);
  Status retry_sends();
  bool has_pending_sends() const noexcept { return !retry_.empty(); }
  // Fails the op on this thread: every lane still open is closed.
  void fail_lanes(block_sparse::OpState& op, const Status& reason);
  // The first unfinished lane of `op` on this thread, for timeout messages ("lane 5 waits for
  // rank 1 (block 77)"); empty when none.
  std::string describe_wait(const block_sparse::OpState& op) const;
  std::uint32_t lanes_here() const noexcept { return static_cast<std::uint32_t>(my_lanes_.size()); }

 private:
  Status send_window(block_sparse::OpState& op, block_sparse::WorkerLane& lane, bool first);
  Status transmit(block_sparse::OpState& op, block_sparse::WorkerLane& lane);
  void finish_lane(block_sparse::OpState& op, block_sparse::WorkerLane& lane);
  void zero_fill(block_sparse::OpState& op, block_sparse::WorkerLane& lane, std::uint64_t until);
  Status violation(const proto::MessageView& m, const std::string& what) const;

  WorkerConfig cfg_;
  block_sparse::Outbox& outbox_;
  std::vector<std::uint32_t> my_lanes_;
  std::vector<struct iovec> iov_;
  struct Pending {
    block_sparse::OpState* op;
    block_sparse::WorkerLane* lane;
  };
  std::vector<Pending> retry_, retrying_;
};

}  // namespace sparcoll::block_sparse
