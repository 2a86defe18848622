// Threshold selection: the entries of a float32 vector whose magnitude reaches a threshold, in
// index order. This is the O(n) filter behind every threshold-based top-k (Ok-Topk's local and
// global selections, the estimator in threshold_estimator.hpp): one pass, no sort.
#pragma once

#include <cstddef>
#include <cstdint>

#include "sparcoll/status.hpp"

namespace sparcoll::algo::compress {

// Writes, in increasing index order, the index i and value values[i] of every entry with
// |values[i]| >= threshold (an ordered comparison: NaN entries are never selected; -0.0 counts as
// 0) into out_indices / out_values, at most `capacity` of them, and sets *selected to the number
// of entries that qualify, which may exceed `capacity`: then only the first `capacity` (lowest
// indices) are written, and a caller with a fixed buffer can detect that and raise the threshold.
// The SIMD kernels store whole vectors: out entries past the selected ones, up to `capacity`, may
// be overwritten with scratch. SIMD (AVX2 / AVX-512, chosen at run time); allocates nothing.
//
// Errors (invalid_argument): threshold NaN or negative; n above 2^32 - 1 (indices are 32-bit, as
// on the wire); a null input with n > 0; null outputs with capacity > 0.
Status select_above(const float* values, std::size_t n, float threshold, std::uint32_t* out_indices,
                    float* out_values, std::size_t capacity, std::size_t* selected);

// Only the number of entries select_above would select (same rule), without writing them.
Status count_above(const float* values, std::size_t n, float threshold, std::size_t* selected);

}  // namespace sparcoll::algo::compress
