// Per-ISA kernels behind select_above.hpp. Internal to src/algo/compress and its tests.
//
// Every level selects the same entries in the same order (the scalar loop is the reference, the
// tests check each level against it). Arguments are already validated: n < 2^32, threshold is
// neither NaN nor negative, buffers are valid for `capacity` entries.
#pragma once

#include <cstddef>
#include <cstdint>

#include "block/simd_level.hpp"

namespace sparcoll::algo::compress {

// Returns how many entries qualify; writes the first min(that, capacity) of them.
using SelectAboveFn = std::size_t (*)(const float* values, std::size_t n, float threshold, std::uint32_t* out_indices,
                                      float* out_values, std::size_t capacity) noexcept;

std::size_t select_above_scalar(const float*, std::size_t, float, std::uint32_t*, float*, std::size_t) noexcept;
std::size_t select_above_avx2(const float*, std::size_t, float, std::uint32_t*, float*, std::size_t) noexcept;
std::size_t select_above_avx512(const float*, std::size_t, float, std::uint32_t*, float*, std::size_t) noexcept;

// The kernel for `level` (scalar where the build has no x86-64 kernels).
SelectAboveFn select_above_kernel(block::SimdLevel level) noexcept;

}  // namespace sparcoll::algo::compress

namespace sparcoll::algo::compress {

// The scalar rule over [first, end), continuing a selection that already counted `count`
// entries; returns the new count. The reference, and the tail of the SIMD kernels.
inline std::size_t select_above_range(const float* values, std::size_t first, std::size_t end, float threshold,
                                      std::uint32_t* out_indices, float* out_values, std::size_t capacity,
                                      std::size_t count) noexcept {
  for (std::size_t i = first; i < end; ++i) {
    const float v = values[i];
    if (!(__builtin_fabsf(v) >= threshold)) continue;
    if (count < capacity) {
      out_indices[count] = static_cast<std::uint32_t>(i);
      out_values[count] = v;
    }
    ++count;
  }
  return count;
}

}  // namespace sparcoll::algo::compress
