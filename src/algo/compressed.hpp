// Compressed allreduce of fp32 gradients on the collective thread (docs/algorithms.md): Ok-Topk
// (oktopk.cpp) and top-k with error feedback over an allgather or a dense allreduce, with fp32,
// fp16/bf16 or QSGD values (topk_ef.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "algo/compress/residual_store.hpp"
#include "algo/compress/threshold_estimator.hpp"
#include "algo/compress/topk.hpp"
#include "algo/p2p_algorithms.hpp"
#include "common/task.hpp"
#include "p2p/peers.hpp"
#include "sparcoll/compression.hpp"

namespace sparcoll::algo {

// What the library keeps for one tensor id. Created by the calling thread at the first call
// with that id (its size is checked there), then used only by the collective thread, which runs
// the calls on it one at a time in call order; so nothing here is locked.
struct CompressedTensor {
  std::uint64_t id = 0;
  std::size_t n = 0;
  // Error feedback: the accumulated gradient is the residual buffer (residual_store.hpp). The
  // store holds just this id; it is per tensor so that the tensor's buffer never moves while
  // other ids are added by later calls.
  compress::ResidualStore residual;
  std::uint64_t calls = 0;  // completed calls (exact-step and repartition schedule)
  // Ok-Topk.
  compress::ThresholdEstimator local;  // the local threshold (exact every tau calls)
  std::size_t local_k = 0;             // the k and tau `local` was made for (0: not yet)
  std::uint32_t local_tau = 0;
  float global_threshold = 0.0f;       // reused between exact global steps
  std::vector<std::uint32_t> bounds;   // P + 1 region boundaries, bounds[0] = 0, bounds[P] = n
  std::uint64_t bounds_age = 0;        // calls since the boundaries were computed
  // Per-call buffers, kept with the tensor so their capacity survives across calls.
  std::vector<std::uint32_t> sel_idx, g_idx;
  std::vector<float> sel_val, g_val;
};

// Scratch of the collective thread shared by all tensors (capacity kept across calls).
struct CompressScratch {
  compress::TopkScratch topk;
  std::vector<float> region;                       // Ok-Topk: this rank's dense region accumulator
  std::vector<std::vector<std::byte>> rx_a, rx_b;  // one received message (or pair) per peer
  std::vector<std::byte> tx;                       // this rank's encoded message
  std::vector<float> values;                       // decoded values / the sparsified dense vector
  std::vector<std::uint32_t> kept;                 // indices whose residual is cleared
  std::vector<std::uint64_t> counts;               // one count (or triple) per rank
};

struct CompressedCall {
  CompressedTensor* tensor = nullptr;
  const float* grad = nullptr;
  float* out = nullptr;  // may alias grad: grad is read once, before out is written
  std::size_t n = 0;
  std::size_t k = 0;     // resolved from Compression::k / density; n for algo none
  Compression c;
  std::uint64_t seed = 0;  // QSGD base seed, already resolved (fixed or per communicator)
  std::size_t ring_segment_bytes = 0;  // topk_dense's ring: the communicator's SPARCOLL_RING_SEGMENT_BYTES
  // Filled by the algorithms (OpStats::payload_words_sent / control_words_sent).
  std::uint64_t payload_words = 0;
  std::uint64_t control_words = 0;
  // Ok-Topk, for tests and docs: the global count selected and whether steps were exact.
  std::uint64_t global_selected = 0;
};

// Ok-Topk (oktopk.cpp). Requires c.values == f32.
Task oktopk_allreduce(p2p::Peers& peers, CompressedCall& call, CompressScratch& s);
// topk_allgather, topk_dense and none (topk_ef.cpp).
Task topk_ef_allreduce(p2p::Peers& peers, CompressedCall& call, CompressScratch& s, Scratch& dense_scratch);

// The first step of every compressed call, before any state of the tensor changes: every rank
// sends every other its (n, k, algo, values, tau, tau', calls) and checks they agree. A rank
// whose arguments were invalid sends an abort instead, so a call that fails on one rank fails
// on all of them before any residual, threshold or boundary moves (and a later call finds the
// tensors alike everywhere). One latency per call; a differing field is a mismatch naming it.
Task agree_call(p2p::Peers& peers, std::uint32_t tag, CompressedCall& call, CompressScratch& s);

// A message of every rank to every other rank in one step: sends `bytes` from `data` to each
// peer and receives each peer's message of at most max_bytes into rx[peer] (rx[rank] untouched).
void post_all_to_all(p2p::Peers& peers, std::uint32_t tag, const void* data, std::size_t bytes,
                     std::vector<std::vector<std::byte>>& rx, std::size_t max_bytes);

}  // namespace sparcoll::algo
