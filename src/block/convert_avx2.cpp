// AVX2 + F16C conversion kernels (the x86-64-v3 baseline). Tails shorter than a vector use the
// scalar forms, which give the same bits.
#include <immintrin.h>

#include "block/convert.hpp"
#include "block/convert_kernels.hpp"

namespace sparcoll::block {

void f16_to_f32_avx2(const std::uint16_t* in, float* out, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  for (; i < n; ++i) out[i] = f16_to_f32(in[i]);
}

void f32_to_f16_avx2(const float* in, std::uint16_t* out, std::size_t n) noexcept {
  std::size_t i = 0;
  // The rounding mode is in the instruction, so MXCSR cannot change the result.
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; i < n; ++i) out[i] = f32_to_f16(in[i]);
}

void bf16_to_f32_avx2(const std::uint16_t* in, float* out, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i)));
    _mm256_storeu_ps(out + i, _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16)));
  }
  for (; i < n; ++i) out[i] = bf16_to_f32(in[i]);
}

void f32_to_bf16_avx2(const float* in, std::uint16_t* out, std::size_t n) noexcept {
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i round_bias = _mm256_set1_epi32(0x7fff);
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  const __m256i inf = _mm256_set1_epi32(0x7f800000);
  const __m256i quiet = _mm256_set1_epi32(0x00400000);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i x = _mm256_castps_si256(_mm256_loadu_ps(in + i));
    // Round to nearest even: add 0x7fff plus the lowest kept bit, then drop 16 bits.
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), one);
    const __m256i rounded = _mm256_add_epi32(x, _mm256_add_epi32(round_bias, lsb));
    // NaN (|x| > Inf as integers; both sides positive, so the signed compare is right) is quieted
    // instead of rounded, which could carry it into Inf.
    const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, abs_mask), inf);
    const __m256i nan = _mm256_or_si256(x, quiet);
    const __m256i high = _mm256_srli_epi32(_mm256_blendv_epi8(rounded, nan, is_nan), 16);
    // Values are now 0..0xffff, so the unsigned-saturating pack just keeps the low halves.
    const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(high), _mm256_extracti128_si256(high, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), packed);
  }
  for (; i < n; ++i) out[i] = f32_to_bf16(in[i]);
}

}  // namespace sparcoll::block
