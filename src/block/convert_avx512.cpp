// AVX-512F/BW conversion kernels; only called when cpu_features() reports both. Each loop runs
// whole vectors and the tail under one mask: masked-off lanes are neither read nor written.
// GCC 12 reports its own _mm512_undefined_*() placeholders as "may be used uninitialized" when
// AVX-512 intrinsics are inlined into target("avx512f") functions (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include "block/convert_kernels.hpp"

namespace sparcoll::block {
namespace {

// Lanes [0, min(left, 16)) of a 16-lane vector.
__attribute__((target("avx512f"))) inline __mmask16 lanes16(std::size_t left) noexcept {
  return left >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << left) - 1);
}

// 16 half-width values through a 512-bit byte-granular masked load (AVX-512BW); only the low
// 256 bits are used, so the 32-bit mask is the 16-bit one widened.
__attribute__((target("avx512f,avx512bw"))) inline __m256i load_u16x16(const std::uint16_t* p, __mmask16 k) noexcept {
  return _mm512_castsi512_si256(_mm512_maskz_loadu_epi16(static_cast<__mmask32>(k), p));
}

__attribute__((target("avx512f,avx512bw"))) inline void store_u16x16(std::uint16_t* p, __mmask16 k, __m256i v) noexcept {
  _mm512_mask_storeu_epi16(p, static_cast<__mmask32>(k), _mm512_castsi256_si512(v));
}

}  // namespace

__attribute__((target("avx512f,avx512bw"))) void f16_to_f32_avx512(const std::uint16_t* in, float* out,
                                                                    std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; i += 16) {
    const __mmask16 k = lanes16(n - i);
    _mm512_mask_storeu_ps(out + i, k, _mm512_cvtph_ps(load_u16x16(in + i, k)));
  }
}

__attribute__((target("avx512f,avx512bw"))) void f32_to_f16_avx512(const float* in, std::uint16_t* out,
                                                                    std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; i += 16) {
    const __mmask16 k = lanes16(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(k, in + i);
    store_u16x16(out + i, k, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
}

__attribute__((target("avx512f,avx512bw"))) void bf16_to_f32_avx512(const std::uint16_t* in, float* out,
                                                                     std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; i += 16) {
    const __mmask16 k = lanes16(n - i);
    const __m512i wide = _mm512_cvtepu16_epi32(load_u16x16(in + i, k));
    _mm512_mask_storeu_ps(out + i, k, _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16)));
  }
}

__attribute__((target("avx512f,avx512bw"))) void f32_to_bf16_avx512(const float* in, std::uint16_t* out,
                                                                     std::size_t n) noexcept {
  const __m512i one = _mm512_set1_epi32(1);
  const __m512i round_bias = _mm512_set1_epi32(0x7fff);
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  const __m512i inf = _mm512_set1_epi32(0x7f800000);
  const __m512i quiet = _mm512_set1_epi32(0x00400000);
  for (std::size_t i = 0; i < n; i += 16) {
    const __mmask16 k = lanes16(n - i);
    const __m512i x = _mm512_castps_si512(_mm512_maskz_loadu_ps(k, in + i));
    // Same arithmetic as the AVX2 kernel: round to nearest even, NaN quieted instead of rounded.
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), one);
    const __m512i rounded = _mm512_add_epi32(x, _mm512_add_epi32(round_bias, lsb));
    const __mmask16 is_nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(x, abs_mask), inf);
    const __m512i chosen = _mm512_mask_blend_epi32(is_nan, rounded, _mm512_or_si512(x, quiet));
    store_u16x16(out + i, k, _mm512_cvtepi32_epi16(_mm512_srli_epi32(chosen, 16)));
  }
}

}  // namespace sparcoll::block
