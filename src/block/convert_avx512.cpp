// AVX-512F/BW conversion kernels; only called when cpu_features() reports both. Each loop runs
// whole vectors, then the tail under a mask: masked-off lanes are neither read nor written.
// GCC 12 reports its own _mm512_undefined_*() placeholders as "may be used uninitialized" when
// AVX-512 intrinsics are inlined into target("avx512f") functions (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include "block/convert_kernels.hpp"

namespace sparcoll::block {
namespace {

#define SPARCOLL_AVX512 __attribute__((target("avx512f,avx512bw")))

constexpr __mmask16 kAll = 0xffff;

// Lanes [0, min(left, 16)) of a 16-lane vector.
SPARCOLL_AVX512 inline __mmask16 lanes16(std::size_t left) noexcept {
  return left >= 16 ? kAll : static_cast<__mmask16>((1u << left) - 1);
}

// Loads and stores of 16 lanes: plain for a full vector (kFull), masked for the tail. Masked
// ones for every vector made the conversions, like the reductions, several times slower than
// AVX2's on this project's host (docs/perf-log.md, "The kernels' loads and stores"). Half-width
// values go through a 512-bit byte-granular masked load (AVX-512BW) of which only the low 256
// bits are used, so the 32-bit mask is the 16-bit one widened.
template <bool kFull>
SPARCOLL_AVX512 inline __m256i load_u16x16(const std::uint16_t* p, __mmask16 k) noexcept {
  if constexpr (kFull) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_si256(_mm512_maskz_loadu_epi16(static_cast<__mmask32>(k), p));
}

template <bool kFull>
SPARCOLL_AVX512 inline void store_u16x16(std::uint16_t* p, __mmask16 k, __m256i v) noexcept {
  if constexpr (kFull)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v);
  else
    _mm512_mask_storeu_epi16(p, static_cast<__mmask32>(k), _mm512_castsi256_si512(v));
}

template <bool kFull>
SPARCOLL_AVX512 inline __m512 load_f32x16(const float* p, __mmask16 k) noexcept {
  if constexpr (kFull) return _mm512_loadu_ps(p);
  return _mm512_maskz_loadu_ps(k, p);
}

template <bool kFull>
SPARCOLL_AVX512 inline void store_f32x16(float* p, __mmask16 k, __m512 v) noexcept {
  if constexpr (kFull)
    _mm512_storeu_ps(p, v);
  else
    _mm512_mask_storeu_ps(p, k, v);
}

template <bool kFull>
SPARCOLL_AVX512 inline void f16_to_f32_x16(const std::uint16_t* in, float* out, __mmask16 k) noexcept {
  store_f32x16<kFull>(out, k, _mm512_cvtph_ps(load_u16x16<kFull>(in, k)));
}

template <bool kFull>
SPARCOLL_AVX512 inline void f32_to_f16_x16(const float* in, std::uint16_t* out, __mmask16 k) noexcept {
  store_u16x16<kFull>(out, k, _mm512_cvtps_ph(load_f32x16<kFull>(in, k), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

template <bool kFull>
SPARCOLL_AVX512 inline void bf16_to_f32_x16(const std::uint16_t* in, float* out, __mmask16 k) noexcept {
  const __m512i wide = _mm512_cvtepu16_epi32(load_u16x16<kFull>(in, k));
  store_f32x16<kFull>(out, k, _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16)));
}

// Same arithmetic as the AVX2 kernel: round to nearest even, NaN quieted instead of rounded.
template <bool kFull>
SPARCOLL_AVX512 inline void f32_to_bf16_x16(const float* in, std::uint16_t* out, __mmask16 k) noexcept {
  const __m512i x = _mm512_castps_si512(load_f32x16<kFull>(in, k));
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_add_epi32(x, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb));
  const __mmask16 is_nan =
      _mm512_cmpgt_epi32_mask(_mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
  const __m512i chosen = _mm512_mask_blend_epi32(is_nan, rounded, _mm512_or_si512(x, _mm512_set1_epi32(0x00400000)));
  store_u16x16<kFull>(out, k, _mm512_cvtepi32_epi16(_mm512_srli_epi32(chosen, 16)));
}

// Whole vectors through the plain form of a 16-lane step, then the tail through the masked one.
template <class In, class Out, void (*kWhole)(const In*, Out*, __mmask16), void (*kTail)(const In*, Out*, __mmask16)>
SPARCOLL_AVX512 inline void each_vector(const In* in, Out* out, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) kWhole(in + i, out + i, kAll);
  if (i < n) kTail(in + i, out + i, lanes16(n - i));
}

}  // namespace

SPARCOLL_AVX512 void f16_to_f32_avx512(const std::uint16_t* in, float* out, std::size_t n) noexcept {
  each_vector<std::uint16_t, float, f16_to_f32_x16<true>, f16_to_f32_x16<false>>(in, out, n);
}

SPARCOLL_AVX512 void f32_to_f16_avx512(const float* in, std::uint16_t* out, std::size_t n) noexcept {
  each_vector<float, std::uint16_t, f32_to_f16_x16<true>, f32_to_f16_x16<false>>(in, out, n);
}

SPARCOLL_AVX512 void bf16_to_f32_avx512(const std::uint16_t* in, float* out, std::size_t n) noexcept {
  each_vector<std::uint16_t, float, bf16_to_f32_x16<true>, bf16_to_f32_x16<false>>(in, out, n);
}

SPARCOLL_AVX512 void f32_to_bf16_avx512(const float* in, std::uint16_t* out, std::size_t n) noexcept {
  each_vector<float, std::uint16_t, f32_to_bf16_x16<true>, f32_to_bf16_x16<false>>(in, out, n);
}

}  // namespace sparcoll::block

#undef SPARCOLL_AVX512
