// The peer-to-peer collective algorithms (docs/algorithms.md). Each is a coroutine over
// p2p::Peers (common/task.hpp), so it runs over any driver, driven by the collective thread or
// by the calling thread (p2p/drive.hpp), and ends with a Status naming what failed.
// All of them produce bitwise-identical results on every rank: every output element is
// reduced by one rank in a fixed order and then copied to the others.
//
// f16 and bf16 are reduced in fp32 accumulators (block/reduce.hpp) and rounded once, like
// block-sparse aggregation; partial sums therefore travel as fp32 (4 bytes per element).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "algo/sparse_vector.hpp"
#include "common/task.hpp"
#include "p2p/peers.hpp"
#include "sparcoll/communicator.hpp"
#include "sparcoll/status.hpp"
#include "sparcoll/types.hpp"

namespace sparcoll::algo {

// Reusable buffers of the SparCML algorithms (capacity kept across collectives).
struct SparseScratch {
  SparseVector local, a, b;                          // this rank's entries, merge ping-pong
  std::vector<std::vector<std::byte>> in, out;      // one message per peer
  std::vector<std::byte> mine;                       // this rank's own encoded message
  std::vector<SparseSpan> pieces;                    // every rank's piece of this rank's range
  std::vector<SparseMessage> messages;               // every rank's final range
  std::vector<std::uint32_t> dense_acc, dense_tmp;   // a densified range (dsar)
  std::vector<std::uint64_t> bits;                   // bitmap of a dense input's non-zero blocks
  std::vector<std::uint64_t> signed_zero_bits;       // its zero blocks that hold a -0.0 (in place)
  // Block recursive doubling's result blocks (the union of every rank's non-zero blocks, the
  // same bits on every rank), left for a caller that counts them (the hybrid's kept plans).
  std::vector<std::uint64_t> union_bits;
};

// Reusable buffers of the collective thread (capacity kept across collectives).
struct Scratch {
  std::vector<std::byte> acc;   // accumulators
  std::vector<std::byte> tmp;   // a received message
  std::vector<std::byte> tmp2;
  std::vector<std::byte> tmp3;
  std::vector<std::uint64_t> words;  // small per-rank tables (the direct algorithm's addresses)
  std::vector<std::uint32_t> acks;
  SparseScratch sparse;
};

// Where a SparCML allreduce puts its result: every element of a dense tensor (dense input
// through Communicator::allreduce), or the caller's SparseResult (allreduce_sparse).
struct SparseOutput {
  void* dense = nullptr;
  SparseResult* result = nullptr;
};

// Element range [begin, end) of chunk c when `count` elements are split into n near-equal chunks.
inline std::size_t chunk_begin(std::size_t count, std::uint32_t n, std::uint32_t c) noexcept {
  return c * (count / n) + std::min<std::size_t>(c, count % n);
}

// --- dense allreduce ------------------------------------------------------------------------
// The ring goes round once per segment of segment_bytes of accumulators (SPARCOLL_RING_SEGMENT_BYTES;
// 0: the whole tensor in one ring): a chunk reduced in one step is sent in the next while it is
// still in the cache, where a chunk of a quarter of a 100 MiB tensor comes back from memory
// (docs/perf-log.md, "The ring in segments").
Task ring_allreduce(p2p::Peers& peers, const void* send, void* recv, std::size_t count, DataType dtype,
                      ReduceOp op, std::size_t segment_bytes, Scratch& scratch);
// The tags one ring may number, [0, kRingTags): a segment takes 2(n-1) of its own, so that a
// fragment of the next segment never meets a receive of this one, the last carries the count
// (ring.cpp), and a hybrid allreduce's dense runs number theirs from multiples of it
// (coll/hybrid_allreduce.cpp).
constexpr std::uint32_t kRingTags = 1u << 16;
// Elements per segment of a ring over n > 1 ranks: segment_bytes of acc_bytes accumulators, at
// least n (a chunk per rank), and at least count over the segments whose tags fit below kRingTags - 1;
// the whole tensor when segment_bytes is 0. Only integers of the call: the same on every rank.
std::size_t ring_segment_elems(std::size_t count, std::uint32_t n, std::size_t acc_bytes, std::size_t segment_bytes);
Task butterfly_allreduce(p2p::Peers& peers, const void* send, void* recv, std::size_t count, DataType dtype,
                           ReduceOp op, Scratch& scratch);
// log2(n) exchanges of the whole tensor: for small tensors, where latency decides.
Task recursive_doubling_allreduce(p2p::Peers& peers, const void* send, void* recv, std::size_t count,
                                    DataType dtype, ReduceOp op, Scratch& scratch);
// log2(n) exchanges of the non-zero blocks seen so far (block_set.hpp): recursive doubling whose
// bytes shrink with the density.
Task block_recursive_doubling_allreduce(p2p::Peers& peers, const void* send, void* recv, std::size_t count,
                                          DataType dtype, ReduceOp op, std::uint32_t block_elems, Scratch& scratch);
// Reduce-scatter + allgather reading the peers' buffers in place (needs peers.reads_peer_memory()).
Task direct_allreduce(p2p::Peers& peers, const void* send, void* recv, std::size_t count, DataType dtype,
                        ReduceOp op, Scratch& scratch);

// --- SparCML sparse allreduce (docs/algorithms.md, "SparCML: SSAR and DSAR") -----------------
// `local` holds this rank's entries (sorted unique indices below dim <= 2^32, accumulators of
// acc_type_of(dtype)); the algorithms may consume it. Every element of the result is computed
// by one fixed sequence of operations, the same on every rank, so results are bitwise identical.
Task ssar_recursive_doubling(p2p::Peers& peers, SparseVector& local, std::size_t dim, DataType dtype,
                               ReduceOp op, const SparseOutput& out, Scratch& scratch);
Task ssar_split_allgather(p2p::Peers& peers, SparseVector& local, std::size_t dim, DataType dtype, ReduceOp op,
                            const SparseOutput& out, Scratch& scratch);
Task dsar_split_allgather(p2p::Peers& peers, SparseVector& local, std::size_t dim, DataType dtype, ReduceOp op,
                            const SparseOutput& out, Scratch& scratch);
// Dense tensors through those algorithms: send's non-zero elements in, every element of recv
// (count <= 2^32 elements, zeros included) out. In place when send == recv.
Task sparse_allreduce_dense(p2p::Peers& peers, Algorithm algo, const void* send, void* recv, std::size_t count,
                              DataType dtype, ReduceOp op, Scratch& scratch);
// allreduce_sparse: this rank's entries (checked and widened by the calling thread) in, *result
// filled.
Task sparse_allreduce(p2p::Peers& peers, Algorithm algo, SparseVector& entries, std::size_t dim, DataType dtype,
                        ReduceOp op, SparseResult* result, Scratch& scratch);

// --- other collectives ----------------------------------------------------------------------
// recv (count elements) = reduction of chunk `rank` of every rank's send (size * count elements).
Task ring_reduce_scatter(p2p::Peers& peers, const void* send, void* recv, std::size_t count, DataType dtype,
                           ReduceOp op, Scratch& scratch);
// recv (size * bytes) = every rank's send (bytes each), in rank order.
Task ring_allgather(p2p::Peers& peers, const void* send, void* recv, std::size_t bytes);
// buffer (bytes) on every rank = buffer on `root`.
Task tree_broadcast(p2p::Peers& peers, void* buffer, std::size_t bytes, std::uint32_t root);
// recv (count elements, on the root only) = reduction of every rank's send: a reduce-scatter
// ring, then each rank's reduced chunk to the root. In place when send == recv on the root.
Task ring_reduce(p2p::Peers& peers, const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op,
                   std::uint32_t root, Scratch& scratch);
// rooted.cpp. recv (size * bytes, on the root only) = every rank's send (bytes each), in rank
// order; in place when send == recv + root * bytes on the root.
Task direct_gather(p2p::Peers& peers, const void* send, void* recv, std::size_t bytes, std::uint32_t root);
// recv (bytes) on every rank p = bytes [p * bytes, (p + 1) * bytes) of the root's send; in place
// when recv == send + root * bytes on the root.
Task direct_scatter(p2p::Peers& peers, const void* send, void* recv, std::size_t bytes, std::uint32_t root,
                      Scratch& scratch);
// rooted.cpp. recv_bytes[p] bytes at recv + recv_offsets[p] = rank p's piece for this rank;
// send_bytes[p] bytes at send + send_offsets[p] go to rank p (the arrays have size() entries;
// this rank's own piece is copied, send_bytes[rank] == recv_bytes[rank]).
Task direct_all_to_all(p2p::Peers& peers, const std::byte* send, const std::size_t* send_bytes,
                         const std::size_t* send_offsets, std::byte* recv, const std::size_t* recv_bytes,
                         const std::size_t* recv_offsets);

}  // namespace sparcoll::algo
