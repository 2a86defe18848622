// Error feedback for sparsified gradients (SparCML's Quantized TopK SGD, Ok-Topk, DGC): what a
// step does not send is kept and added to the next step's gradient, so nothing is lost, only
// delayed.
//
// Per step, for a tensor id:  acc = accumulate(id, grad)    (acc = grad + residual)
//                             select entries of acc, copy their values out, send them
//                             keep_unsent(id, sent indices)  (residual = acc with sent entries 0)
// so that, exactly (no arithmetic touches the kept values): acc = sent + residual.
//
// The accumulated vector IS the residual buffer: accumulate() adds in place and returns it, so a
// step costs one pass over n values and no copy, and the store allocates only when an id is
// first seen. Not thread-safe: one store per thread, or the caller serializes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "sparcoll/status.hpp"

namespace sparcoll::algo::compress {

class ResidualStore {
 public:
  // residual += grad (the residual starts at 0 when `id` is first used) and *accumulated points
  // at it: n values, owned by the store, valid until erase(id) or the store's destruction. Read
  // (select from) it, copy the values to send, then call keep_unsent().
  // Errors (invalid_argument): `id` was used with a different n (both sizes named); grad or
  // accumulated null with n > 0.
  Status accumulate(std::uint64_t id, const float* grad, std::size_t n, float** accumulated);

  // Sets the residual of `id` to 0 at the `nnz` sent indices (any order, repeats allowed).
  // Errors (invalid_argument): no residual for `id` yet; an index out of range (its position
  // in sent_indices and the tensor size named; nothing is changed then); null indices with nnz > 0.
  Status keep_unsent(std::uint64_t id, const std::uint32_t* sent_indices, std::size_t nnz);

  // The residual of `id` (nullptr if unknown) and its size.
  const float* residual(std::uint64_t id, std::size_t* n = nullptr) const noexcept;
  // Zeroes the residual of `id` (e.g. after a dense step that sent everything); false if unknown.
  bool clear(std::uint64_t id) noexcept;
  // Forgets `id` and frees its buffer; false if unknown.
  bool erase(std::uint64_t id) noexcept;
  std::size_t size() const noexcept { return residuals_.size(); }

 private:
  std::unordered_map<std::uint64_t, std::vector<float>> residuals_;
};

}  // namespace sparcoll::algo::compress
