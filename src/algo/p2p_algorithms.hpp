// The peer-to-peer collective algorithms (docs/algorithms.md). Each runs on the collective
// thread over coll::Peers, so over any driver, and returns a Status naming what failed.
// All of them produce bitwise-identical results on every rank: every output element is
// reduced by one rank in a fixed order and then copied to the others.
//
// f16 and bf16 are reduced in fp32 accumulators (block/reduce.hpp) and rounded once, like
// block-sparse aggregation; partial sums therefore travel as fp32 (4 bytes per element).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "coll/peers.hpp"
#include "sparcoll/status.hpp"
#include "sparcoll/types.hpp"

namespace sparcoll::algo {

// Reusable buffers of the collective thread (capacity kept across collectives).
struct Scratch {
  std::vector<std::byte> acc;   // accumulators
  std::vector<std::byte> tmp;   // a received message
  std::vector<std::byte> tmp2;
  std::vector<std::byte> tmp3;
};

// Element range [begin, end) of chunk c when `count` elements are split into n near-equal chunks.
inline std::size_t chunk_begin(std::size_t count, std::uint32_t n, std::uint32_t c) noexcept {
  return c * (count / n) + std::min<std::size_t>(c, count % n);
}

// Whether SparCML's SSAR/DSAR run on the collective thread in this build (algo=auto considers
// them only then).
inline constexpr bool kSparcmlAlgorithmsBuilt = false;

// --- dense allreduce ------------------------------------------------------------------------
Status ring_allreduce(coll::Peers& peers, const void* send, void* recv, std::size_t count, DataType dtype,
                      ReduceOp op, Scratch& scratch);
Status butterfly_allreduce(coll::Peers& peers, const void* send, void* recv, std::size_t count, DataType dtype,
                           ReduceOp op, Scratch& scratch);

// --- other collectives ----------------------------------------------------------------------
// recv (count elements) = reduction of chunk `rank` of every rank's send (size * count elements).
Status ring_reduce_scatter(coll::Peers& peers, const void* send, void* recv, std::size_t count, DataType dtype,
                           ReduceOp op, Scratch& scratch);
// recv (size * bytes) = every rank's send (bytes each), in rank order.
Status ring_allgather(coll::Peers& peers, const void* send, void* recv, std::size_t bytes);
// buffer (bytes) on every rank = buffer on `root`.
Status tree_broadcast(coll::Peers& peers, void* buffer, std::size_t bytes, std::uint32_t root);

}  // namespace sparcoll::algo
