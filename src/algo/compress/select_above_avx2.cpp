// AVX2 kernel for threshold selection (the x86-64-v3 baseline: no target attribute needed).
#include <immintrin.h>

#include <array>

#include "algo/compress/select_above_kernels.hpp"

namespace sparcoll::algo::compress {
namespace {

// For each 8-bit lane mask, the positions of its set bits packed low, one byte each: the
// permutation that left-packs the selected lanes (AVX2 has no compress instruction).
constexpr std::array<std::uint64_t, 256> make_pack_table() {
  std::array<std::uint64_t, 256> table{};
  for (unsigned mask = 0; mask < 256; ++mask) {
    std::uint64_t entry = 0;
    unsigned k = 0;
    for (unsigned lane = 0; lane < 8; ++lane)
      if (mask & (1u << lane)) entry |= std::uint64_t{lane} << (8 * k++);
    table[mask] = entry;
  }
  return table;
}
constexpr std::array<std::uint64_t, 256> kPackTable = make_pack_table();

// Emits the lanes of `v` (elements base..base+7) set in `mask`; returns the new count. With room
// for a whole vector the packed lanes are stored in one go (lanes past the selected ones are
// scratch that the next store overwrites); near the end of the buffer lanes are written one by
// one up to `capacity`, and past it only counted.
inline std::size_t emit(__m256 v, unsigned mask, std::uint32_t base, std::uint32_t* out_indices, float* out_values,
                        std::size_t capacity, std::size_t count) noexcept {
  if (count + 8 <= capacity) {
    const __m256i perm = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(kPackTable[mask])));
    const __m256i idx =
        _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(base)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    _mm256_storeu_ps(out_values + count, _mm256_permutevar8x32_ps(v, perm));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out_indices + count), _mm256_permutevar8x32_epi32(idx, perm));
  } else if (count < capacity) {
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, v);
    std::size_t c = count;
    for (unsigned m = mask; m != 0 && c < capacity; m &= m - 1) {
      const unsigned lane = static_cast<unsigned>(__builtin_ctz(m));
      out_indices[c] = base + lane;
      out_values[c] = lanes[lane];
      ++c;
    }
  }
  return count + static_cast<unsigned>(__builtin_popcount(mask));
}

inline unsigned lanes_at_or_above(__m256 v, __m256 abs_mask, __m256 threshold) noexcept {
  // _CMP_GE_OQ: ordered, so a NaN lane is never selected, as in the scalar rule.
  return static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(v, abs_mask), threshold, _CMP_GE_OQ)));
}

}  // namespace

std::size_t select_above_avx2(const float* values, std::size_t n, float threshold, std::uint32_t* out_indices,
                              float* out_values, std::size_t capacity) noexcept {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 t = _mm256_set1_ps(threshold);
  std::size_t i = 0, count = 0;
  // 32 values per test: at the densities top-k runs at (0.1-10%) most groups select nothing,
  // and one combined mask lets them cost four compares and a branch.
  for (; i + 32 <= n; i += 32) {
    const __m256 a = _mm256_loadu_ps(values + i), b = _mm256_loadu_ps(values + i + 8);
    const __m256 c = _mm256_loadu_ps(values + i + 16), d = _mm256_loadu_ps(values + i + 24);
    const unsigned ma = lanes_at_or_above(a, abs_mask, t), mb = lanes_at_or_above(b, abs_mask, t);
    const unsigned mc = lanes_at_or_above(c, abs_mask, t), md = lanes_at_or_above(d, abs_mask, t);
    if ((ma | mb | mc | md) == 0) continue;
    const auto base = static_cast<std::uint32_t>(i);
    if (ma) count = emit(a, ma, base, out_indices, out_values, capacity, count);
    if (mb) count = emit(b, mb, base + 8, out_indices, out_values, capacity, count);
    if (mc) count = emit(c, mc, base + 16, out_indices, out_values, capacity, count);
    if (md) count = emit(d, md, base + 24, out_indices, out_values, capacity, count);
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 a = _mm256_loadu_ps(values + i);
    const unsigned m = lanes_at_or_above(a, abs_mask, t);
    if (m) count = emit(a, m, static_cast<std::uint32_t>(i), out_indices, out_values, capacity, count);
  }
  return select_above_range(values, i, n, threshold, out_indices, out_values, capacity, count);
}

}  // namespace sparcoll::algo::compress
