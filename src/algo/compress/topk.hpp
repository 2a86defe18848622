// Exact top-k selection by magnitude of a float32 vector: the reference selection, and the
// exact recomputation the threshold estimator (threshold_estimator.hpp) falls back on every τ
// calls. O(n): an nth_element over the magnitudes, then one selection pass; no sort of the data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "sparcoll/status.hpp"

namespace sparcoll::algo::compress {

// Scratch for the selections below: n 32-bit magnitudes. Keep one per thread and reuse it; its
// capacity grows to the largest n seen and is never given back, so calls after the first
// allocate nothing.
struct TopkScratch {
  std::vector<std::uint32_t> magnitudes;
};

// The k-th largest magnitude |values[i]| (1 <= k <= n), exactly: the threshold at which
// select_above() selects at least k entries, and more only when several entries tie at it.
//
// Errors (invalid_argument): k outside [1, n]; a NaN value (its index is named: a NaN has no
// magnitude order); n above 2^32 - 1; a null `values` with n > 0.
Status topk_threshold(const float* values, std::size_t n, std::size_t k, float* threshold, TopkScratch& scratch);

// Writes exactly k entries (0 <= k <= n): the indices (strictly increasing) and values of the k
// largest magnitudes. Ties at the k-th magnitude go to the lowest indices, so the result is a
// function of the input alone. Zeros are selected when fewer than k entries are non-zero
// (exactly k is the contract; callers that never send zeros filter them). +-Inf are the
// largest magnitudes.
//
// Errors (invalid_argument): k > n; a NaN value (named by index); n above 2^32 - 1; null
// pointers where data is needed.
Status exact_topk(const float* values, std::size_t n, std::size_t k, std::uint32_t* out_indices, float* out_values,
                  TopkScratch& scratch);

}  // namespace sparcoll::algo::compress
