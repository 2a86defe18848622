// One peer-to-peer collective (anything but block-sparse aggregation) as the calling thread
// hands it to the collective thread: plain arguments, no callables, so the hand-over is a
// pointer through an SPSC queue.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "algo/compressed.hpp"
#include "algo/sparse_vector.hpp"
#include "block_sparse/op_state.hpp"
#include "common/request_state.hpp"
#include "sparcoll/types.hpp"

namespace sparcoll::coll {

enum class CollKind : std::uint8_t {
  allreduce,
  broadcast,
  allgather,
  reduce_scatter,
  sparse_allreduce,
  compressed_allreduce,
  hybrid_allreduce,
  reduce,
  gather,
  scatter,
  // Not collectives: only two ranks call them, so they take no sequence number; the collective
  // thread posts them to the mailbox (mailbox.hpp) and frees their slot at once.
  send,
  recv,
  all_to_all,
};

constexpr bool is_p2p(CollKind k) noexcept { return k == CollKind::send || k == CollKind::recv; }

// The hybrid allreduce's block-sparse half, prepared by the calling thread: the op slot it
// reserved (its bitmap not yet filled), and each stripe's sample mask (which of its sampled
// blocks are non-zero, algo::sample_stripe_masks).
struct HybridArgs {
  block_sparse::OpState* sparse_part = nullptr;
  bool handed_over = false;  // the collective thread gave sparse_part to the engine
  std::uint32_t stripe_blocks = 0;
  std::vector<std::uint32_t> stripe_masks;
  // The tensor goes whole by block recursive doubling when its estimated bytes are at most
  // rd_max_percent of the ring's; else, below SPARCOLL_HYBRID_MIN_BYTES, whole by the dense
  // algorithm, and from it (stripes_unless_rd) in stripes.
  bool stripes_unless_rd = false;
  std::uint32_t rd_max_percent = 0;
};

// The sparse (index-value) input and output of allreduce_sparse. The calling thread checks the
// caller's arrays and copies them here (u32 indices, values widened to accumulators), so the
// caller may reuse them at once; the vectors keep their capacity with the op slot.
struct SparseArgs {
  algo::SparseVector entries;
  std::size_t dim = 0;
  SparseResult* result = nullptr;  // the caller's, filled on success
};

struct CollOp {
  CollKind kind = CollKind::allreduce;
  Algorithm algo = Algorithm::ring;  // resolved: never from_options or auto_select here
  std::uint32_t seq = 0;
  const void* send = nullptr;
  void* recv = nullptr;
  // allreduce, reduce: elements; allgather, gather, scatter: per rank; reduce_scatter: per rank out
  std::size_t count = 0;
  DataType dtype = DataType::f32;
  ReduceOp op = ReduceOp::sum;
  std::uint32_t root = 0;  // broadcast, reduce, gather, scatter
  // send, recv: count is bytes; the other rank (recv: or sparcoll::kAnySource), the caller's tag, and
  // where a recv writes who sent its message (may be null).
  std::int32_t peer = 0;
  std::uint32_t tag = 0;
  std::int32_t* source = nullptr;
  // all_to_all: bytes and offsets per rank into send and recv (copied from the caller's
  // arrays; capacity kept with the slot).
  std::vector<std::size_t> send_bytes, send_offsets, recv_bytes, recv_offsets;
  SparseArgs sparse;
  HybridArgs hybrid;
  // compressed_allreduce: tensor, grad (send), out (recv), n (count), k, compression, seed; the
  // algorithm writes its word counts back.
  algo::CompressedCall compressed;
  // Non-empty when this rank's arguments are invalid: the collective thread tells the other
  // ranks (so they fail this collective too, instead of waiting) and fails it with this text.
  std::string invalid;
  ErrorCode invalid_code = ErrorCode::invalid_argument;  // no_resource: this rank ran out of memory
  std::chrono::steady_clock::time_point deadline;
  std::shared_ptr<detail::RequestState> request;
  // 1 from submission until the collective thread finished it (the slot may then be reused).
  std::atomic<std::uint32_t> busy{0};
};

}  // namespace sparcoll::coll
