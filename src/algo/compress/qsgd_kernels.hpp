// Per-ISA kernels behind qsgd.hpp: one bucket's codes from its values, and one bucket's decode
// added into an accumulator. Internal to src/algo/compress and its tests.
//
// Every level produces the same bytes and the same sums: the scalar forms are the reference,
// the SIMD forms run the same fp32 operations in the same order (the tests compare them).
#pragma once

#include <cstddef>
#include <cstdint>

#include "algo/compress/counter_rng.hpp"
#include "block/simd_level.hpp"

namespace sparcoll::algo::compress {

// How a bucket's values map to levels: x = min(|v| * pre * inv, s). For scales so small that
// s / scale would overflow, pre = 2^64 and inv = s / (scale * 2^64) (exact power-of-two scaling).
struct EncodeParams {
  float pre, inv;
  BucketKey key;
};

// How a bucket's codes turn into magnitudes: level * unit * post, except the top level, which is
// the scale itself (the largest value of a bucket comes back exactly, whatever the rounding of
// scale / s). For scales so small that scale / s would lose bits as a subnormal, unit is taken
// 2^64 larger and `post` scales the product back once.
struct DecodeParams {
  float unit, post, scale;
};

// Codes of values [first, m) of a bucket (first a multiple of 8, so its codes start on a byte),
// written from `codes` = the bucket's code bytes; the last byte's unused high bits are 0.
using QsgdEncodeFn = void (*)(const float* v, std::size_t first, std::size_t m, const EncodeParams& p,
                              unsigned char* codes) noexcept;
// accum[i] += decode(code i), i in [first, m), first a multiple of 8.
using QsgdDecodeAddFn = void (*)(const unsigned char* codes, std::size_t first, std::size_t m, const DecodeParams& p,
                                 float* accum) noexcept;

template <unsigned kBits>
void qsgd_encode_scalar(const float*, std::size_t, std::size_t, const EncodeParams&, unsigned char*) noexcept;
template <unsigned kBits>
void qsgd_decode_add_scalar(const unsigned char*, std::size_t, std::size_t, const DecodeParams&, float*) noexcept;
template <unsigned kBits>
void qsgd_encode_avx2(const float*, std::size_t, std::size_t, const EncodeParams&, unsigned char*) noexcept;
template <unsigned kBits>
void qsgd_decode_add_avx2(const unsigned char*, std::size_t, std::size_t, const DecodeParams&, float*) noexcept;

// The kernels for `bits` (2, 4, 8) at `level` (AVX-512 uses the AVX2 forms).
QsgdEncodeFn qsgd_encode_kernel(block::SimdLevel level, unsigned bits) noexcept;
QsgdDecodeAddFn qsgd_decode_add_kernel(block::SimdLevel level, unsigned bits) noexcept;

}  // namespace sparcoll::algo::compress
