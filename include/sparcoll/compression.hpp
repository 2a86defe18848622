// Compressed gradient allreduce: top-k sparsification with error feedback (Ok-Topk, or exact
// top-k for any exchange) and low-precision values (fp16, bf16, QSGD). See docs/algorithms.md.
//
// These methods are lossy by design and are meant for fp32 gradients of data-parallel training,
// where what a step does not send is kept in a residual and added to the next step's gradient
// (error feedback), so it is delayed, not lost. They take fp32 only: the residual arithmetic
// (acc = grad + residual, residual = acc - sent) must be exact in the gradient's own precision.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "sparcoll/types.hpp"

namespace sparcoll {

// How the entries to send are chosen and exchanged.
enum class CompressionAlgo : std::uint8_t {
  // Ok-Topk (Li & Hoefler, PPoPP'22): threshold-estimated local top-k, balanced region split and
  // reduce, global top-k over the reduced regions, balanced allgather. About k entries of the
  // summed gradient survive; at most 6k words (an index or a value is a word) leave each rank.
  oktopk = 0,
  // Exact local top-k (k entries per rank) and an allgather of the (index, value) pairs, merged
  // locally in rank order (DGC / SparCML's Quantized TopK pattern). Up to P*k entries survive.
  topk_allgather = 1,
  // Exact local top-k, then the sparsified dense vector through a dense allreduce
  // (Compression::dense_algo: ring or butterfly). Error feedback for any exact algorithm.
  topk_dense = 2,
  // No sparsification: every value is sent, only the value format compresses (qsgd, fp16, bf16)
  // through an allgather of the encoded vectors.
  none = 3,
};

// The wire format of the exchanged values (indices are always 32-bit).
enum class ValueFormat : std::uint8_t { f32 = 0, f16 = 1, bf16 = 2, qsgd2 = 3, qsgd4 = 4, qsgd8 = 5 };

struct Compression {
  CompressionAlgo algo = CompressionAlgo::oktopk;
  // Entries selected per rank: k if non-zero, else max(1, floor(density * count)). k must be in
  // [1, count] (ignored for algo none).
  std::size_t k = 0;
  double density = 0.0;
  // Keep what was not sent (and, with lossy values, the rounding error) in a residual per tensor
  // id and add it to the next call's gradient. On by default: top-k without it does not converge.
  bool error_feedback = true;
  // oktopk: f32 only. topk_allgather / none: any. topk_dense: f32 (the dense algorithms send
  // fp32 partial sums, so narrower values would save nothing).
  ValueFormat values = ValueFormat::f32;
  // QSGD: the seed of the stochastic rounding. Set: every call is reproducible (the draw is a
  // function of seed, tensor id, call number and rank). Unset: a random seed per communicator.
  std::optional<std::uint64_t> seed;
  std::size_t qsgd_bucket = 1024;
  // Ok-Topk: exact local and global thresholds every `tau` calls (estimated in between), region
  // boundaries recomputed every `tau_prime` calls.
  std::uint32_t tau = 32;
  std::uint32_t tau_prime = 64;
  // topk_dense: the dense allreduce that carries the sparsified vector (ring or butterfly).
  Algorithm dense_algo = Algorithm::ring;
  // out = sum over ranks of what was sent, or that sum divided by the rank count (what DDP
  // wants: the mean gradient).
  ReduceOp op = ReduceOp::avg;
};

}  // namespace sparcoll
