// AVX2 kernels for QSGD (the x86-64-v3 baseline: no target attribute needed). Eight values per
// step: the counter-based draw (two 32-bit multiplies per round), the level, and the codes
// packed with variable shifts; decoding unpacks with variable shifts the same way.
#include <immintrin.h>

#include <cstring>

#include "algo/compress/qsgd_kernels.hpp"

namespace sparcoll::algo::compress {
namespace {

// mix32 (counter_rng.hpp) on eight lanes.
inline __m256i mix32x8(__m256i x) noexcept {
  x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
  x = _mm256_mullo_epi32(x, _mm256_set1_epi32(0x7feb352d));
  x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 15));
  x = _mm256_mullo_epi32(x, _mm256_set1_epi32(static_cast<int>(0x846ca68bu)));
  return _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
}

inline std::uint32_t or_lanes(__m256i x) noexcept {
  __m128i v = _mm_or_si128(_mm256_castsi256_si128(x), _mm256_extracti128_si256(x, 1));
  v = _mm_or_si128(v, _mm_shuffle_epi32(v, 0x4e));
  v = _mm_or_si128(v, _mm_shuffle_epi32(v, 0xb1));
  return static_cast<std::uint32_t>(_mm_cvtsi128_si32(v));
}

// Lane i shifted by i * kBits: the shift counts that place eight codes in one word.
template <unsigned kBits>
inline __m256i lane_shifts() noexcept {
  return _mm256_setr_epi32(0, kBits, 2 * kBits, 3 * kBits, 4 * kBits, 5 * kBits, 6 * kBits, 7 * kBits);
}

}  // namespace

template <unsigned kBits>
void qsgd_encode_avx2(const float* v, std::size_t first, std::size_t m, const EncodeParams& p,
                      unsigned char* codes) noexcept {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 fs = _mm256_set1_ps(static_cast<float>((1u << (kBits - 1)) - 1));
  const __m256 pre = _mm256_set1_ps(p.pre), inv = _mm256_set1_ps(p.inv);
  const __m256 one = _mm256_set1_ps(1.0f), draw_scale = _mm256_set1_ps(0x1p-24f);
  const __m256i key_lo = _mm256_set1_epi32(static_cast<int>(p.key.lo));
  const __m256i key_hi = _mm256_set1_epi32(static_cast<int>(p.key.hi));
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), zero = _mm256_setzero_si256();
  std::size_t j = first;
  for (; j + 8 <= m; j += 8) {
    const __m256 value = _mm256_loadu_ps(v + j);
    // Same operations, same order as the scalar kernel: the bytes must match.
    const __m256 x = _mm256_min_ps(_mm256_mul_ps(_mm256_mul_ps(_mm256_and_ps(value, abs_mask), pre), inv), fs);
    const __m256 floor_x = _mm256_floor_ps(x);
    const __m256i index = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(j)), iota);
    const __m256i bits = mix32x8(_mm256_add_epi32(mix32x8(_mm256_xor_si256(index, key_lo)), key_hi));
    const __m256 u = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(bits, 8)), draw_scale);
    const __m256 up = _mm256_and_ps(_mm256_cmp_ps(u, _mm256_sub_ps(x, floor_x), _CMP_LT_OQ), one);
    const __m256i level = _mm256_cvttps_epi32(_mm256_add_ps(floor_x, up));
    const __m256i negative = _mm256_srli_epi32(_mm256_castps_si256(value), 31);
    const __m256i sign = _mm256_andnot_si256(_mm256_cmpeq_epi32(level, zero), negative);
    const __m256i code = _mm256_or_si256(_mm256_slli_epi32(sign, kBits - 1), level);
    if constexpr (kBits == 8) {
      const __m256i b = _mm256_packus_epi16(_mm256_packus_epi32(code, code), zero);
      const auto lo = static_cast<std::uint32_t>(_mm_cvtsi128_si32(_mm256_castsi256_si128(b)));
      const auto hi = static_cast<std::uint32_t>(_mm_cvtsi128_si32(_mm256_extracti128_si256(b, 1)));
      const std::uint64_t word = lo | (std::uint64_t{hi} << 32);
      std::memcpy(codes + j, &word, 8);
    } else {
      const std::uint32_t word = or_lanes(_mm256_sllv_epi32(code, lane_shifts<kBits>()));
      std::memcpy(codes + j * kBits / 8, &word, kBits);  // eight codes fill exactly kBits bytes
    }
  }
  if (j < m) qsgd_encode_scalar<kBits>(v, j, m, p, codes);
}

template <unsigned kBits>
void qsgd_decode_add_avx2(const unsigned char* codes, std::size_t first, std::size_t m, const DecodeParams& p,
                          float* acc) noexcept {
  const __m256i level_mask = _mm256_set1_epi32((1 << (kBits - 1)) - 1);
  const __m256 unit = _mm256_set1_ps(p.unit), post = _mm256_set1_ps(p.post), scale = _mm256_set1_ps(p.scale);
  std::size_t j = first;
  for (; j + 8 <= m; j += 8) {
    __m256i code;
    if constexpr (kBits == 8) {
      code = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + j)));
    } else {
      std::uint32_t word = 0;
      std::memcpy(&word, codes + j * kBits / 8, kBits);
      code = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(word)), lane_shifts<kBits>()),
                              _mm256_set1_epi32((1 << kBits) - 1));
    }
    const __m256i level = _mm256_and_si256(code, level_mask);
    const __m256 scaled = _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(level), unit), post);
    const __m256 magnitude = _mm256_blendv_ps(scaled, scale, _mm256_castsi256_ps(_mm256_cmpeq_epi32(level, level_mask)));
    const __m256i sign = _mm256_slli_epi32(_mm256_srli_epi32(code, kBits - 1), 31);
    const __m256 value = _mm256_xor_ps(magnitude, _mm256_castsi256_ps(sign));
    _mm256_storeu_ps(acc + j, _mm256_add_ps(_mm256_loadu_ps(acc + j), value));
  }
  if (j < m) qsgd_decode_add_scalar<kBits>(codes, j, m, p, acc);
}

template void qsgd_encode_avx2<2>(const float*, std::size_t, std::size_t, const EncodeParams&, unsigned char*) noexcept;
template void qsgd_encode_avx2<4>(const float*, std::size_t, std::size_t, const EncodeParams&, unsigned char*) noexcept;
template void qsgd_encode_avx2<8>(const float*, std::size_t, std::size_t, const EncodeParams&, unsigned char*) noexcept;
template void qsgd_decode_add_avx2<2>(const unsigned char*, std::size_t, std::size_t, const DecodeParams&, float*) noexcept;
template void qsgd_decode_add_avx2<4>(const unsigned char*, std::size_t, std::size_t, const DecodeParams&, float*) noexcept;
template void qsgd_decode_add_avx2<8>(const unsigned char*, std::size_t, std::size_t, const DecodeParams&, float*) noexcept;

}  // namespace sparcoll::algo::compress
