// AVX-512 kernel for threshold selection; only called when cpu_features() reports AVX-512F/BW.
#include <immintrin.h>

#include "algo/compress/select_above_kernels.hpp"

namespace sparcoll::algo::compress {
namespace {

#define SPARCOLL_AVX512 __attribute__((target("avx512f,avx512bw")))

// Emits the lanes of `v` (elements base..base+15) set in `mask`; returns the new count. Whole
// vectors go through vcompress into a register and a plain store (a compressing store to memory
// is microcoded and slow on some cores); lanes past the selected ones are scratch the next store
// overwrites. Near the end of the buffer, a masked compressing store of the lanes that still fit.
SPARCOLL_AVX512 inline std::size_t emit(__m512 v, __mmask16 mask, std::uint32_t base, std::uint32_t* out_indices,
                                        float* out_values, std::size_t capacity, std::size_t count) noexcept {
  const __m512i idx = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(base)),
                                       _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  const auto selected = static_cast<std::size_t>(__builtin_popcount(mask));
  if (count + 16 <= capacity) {
    _mm512_storeu_ps(out_values + count, _mm512_maskz_compress_ps(mask, v));
    _mm512_storeu_si512(out_indices + count, _mm512_maskz_compress_epi32(mask, idx));
  } else if (count < capacity) {
    // Keep only the lowest (capacity - count) set bits: they are the ones that fit.
    unsigned m = mask;
    for (std::size_t drop = selected > capacity - count ? selected - (capacity - count) : 0; drop > 0; --drop)
      m &= ~(1u << (31 - __builtin_clz(m)));
    _mm512_mask_compressstoreu_ps(out_values + count, static_cast<__mmask16>(m), v);
    _mm512_mask_compressstoreu_epi32(out_indices + count, static_cast<__mmask16>(m), idx);
  }
  return count + selected;
}

SPARCOLL_AVX512 inline __mmask16 lanes_at_or_above(__m512 v, __m512 threshold) noexcept {
  return _mm512_cmp_ps_mask(_mm512_abs_ps(v), threshold, _CMP_GE_OQ);  // ordered: NaN never selected
}

}  // namespace

SPARCOLL_AVX512 std::size_t select_above_avx512(const float* values, std::size_t n, float threshold,
                                                std::uint32_t* out_indices, float* out_values,
                                                std::size_t capacity) noexcept {
  const __m512 t = _mm512_set1_ps(threshold);
  std::size_t i = 0, count = 0;
  // 64 values per test, as the AVX2 kernel does with 32: sparse selections skip most groups.
  for (; i + 64 <= n; i += 64) {
    const __m512 a = _mm512_loadu_ps(values + i), b = _mm512_loadu_ps(values + i + 16);
    const __m512 c = _mm512_loadu_ps(values + i + 32), d = _mm512_loadu_ps(values + i + 48);
    const __mmask16 ma = lanes_at_or_above(a, t), mb = lanes_at_or_above(b, t);
    const __mmask16 mc = lanes_at_or_above(c, t), md = lanes_at_or_above(d, t);
    if ((ma | mb | mc | md) == 0) continue;
    const auto base = static_cast<std::uint32_t>(i);
    if (ma) count = emit(a, ma, base, out_indices, out_values, capacity, count);
    if (mb) count = emit(b, mb, base + 16, out_indices, out_values, capacity, count);
    if (mc) count = emit(c, mc, base + 32, out_indices, out_values, capacity, count);
    if (md) count = emit(d, md, base + 48, out_indices, out_values, capacity, count);
  }
  // The rest (< 64 values) 16 at a time; the last partial vector through a masked load, whose
  // masked-off lanes read as 0.0 and never fault (and are masked out of the selection).
  for (; i < n; i += 16) {
    const std::size_t left = n - i;
    const __mmask16 live = left >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << left) - 1);
    const __m512 a = _mm512_maskz_loadu_ps(live, values + i);
    const __mmask16 m = static_cast<__mmask16>(lanes_at_or_above(a, t) & live);
    if (m) count = emit(a, m, static_cast<std::uint32_t>(i), out_indices, out_values, capacity, count);
  }
  return count;
}

#undef SPARCOLL_AVX512

}  // namespace sparcoll::algo::compress
