// fp16 / bf16 <-> fp32: the exact scalar conversions (the reference for every SIMD level) and
// the run-time dispatch of the array forms.
#include "block/convert.hpp"

#include <bit>

#include "block/convert_kernels.hpp"

namespace sparcoll::block {

float f16_to_f32(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) {
    // Inf; NaN keeps sign and payload and comes out quiet, as vcvtph2ps makes it.
    const std::uint32_t quiet = mant != 0 ? 0x00400000u : 0;
    return std::bit_cast<float>(sign | 0x7f800000u | quiet | (mant << 13));
  }
  if (exp != 0) return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
  if (mant == 0) return std::bit_cast<float>(sign);
  // Subnormal half (mant * 2^-24) is a normal float: shift the leading one up to the hidden
  // bit, lowering the exponent once per shift from that of 2^-14.
  std::uint32_t biased = 113;
  while ((mant & 0x400u) == 0) {
    mant <<= 1;
    --biased;
  }
  return std::bit_cast<float>(sign | (biased << 23) | ((mant & 0x3ffu) << 13));
}

std::uint16_t f32_to_f16(float f) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t ax = x & 0x7fffffffu;
  // NaN: quiet it and keep the top 9 payload bits, as vcvtps2ph does.
  if (ax > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  // From 65520 (halfway between the largest half, 65504, and 2^16) up, round to nearest even
  // gives Inf; Inf itself lands here too.
  if (ax >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);
  if (ax >= 0x38800000u) {  // normal half (>= 2^-14)
    // Adding 0xfff plus the lowest kept bit rounds to nearest even on the dropped 13 bits; a
    // carry out of the mantissa bumps the exponent, which is the right result.
    const std::uint32_t rounded = ax + 0xfffu + ((ax >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
  }
  const std::uint32_t biased = ax >> 23;
  if (biased < 102) return sign;  // below 2^-25, half the smallest subnormal: rounds to zero
  // Subnormal half: the value in units of 2^-24 is mant >> shift, rounded to nearest even. A
  // result of 0x400 is the smallest normal, correctly encoded.
  const std::uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
  const std::uint32_t shift = 126 - biased;  // 14..24
  std::uint32_t result = mant >> shift;
  const std::uint32_t rest = mant & ((1u << shift) - 1);
  const std::uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (result & 1u))) ++result;
  return static_cast<std::uint16_t>(sign | result);
}

float bf16_to_f32(std::uint16_t h) noexcept { return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16); }

std::uint16_t f32_to_bf16(float f) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  // NaN: set the quiet bit, so a payload living only in the dropped low half cannot turn it into Inf.
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x | 0x00400000u) >> 16);
  // Round to nearest even on the dropped 16 bits; finite values past the largest bf16 carry into Inf.
  return static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

void f16_to_f32_scalar(const std::uint16_t* in, float* out, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = f16_to_f32(in[i]);
}
void f32_to_f16_scalar(const float* in, std::uint16_t* out, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = f32_to_f16(in[i]);
}
void bf16_to_f32_scalar(const std::uint16_t* in, float* out, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = bf16_to_f32(in[i]);
}
void f32_to_bf16_scalar(const float* in, std::uint16_t* out, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = f32_to_bf16(in[i]);
}

#if defined(__x86_64__)
#define SPARCOLL_CONVERT_DISPATCH(name, level, ...) \
  switch (level) {                                   \
    case SimdLevel::avx512: return name##_avx512(__VA_ARGS__); \
    case SimdLevel::avx2: return name##_avx2(__VA_ARGS__);     \
    default: return name##_scalar(__VA_ARGS__);                \
  }
#else
#define SPARCOLL_CONVERT_DISPATCH(name, level, ...) return name##_scalar(__VA_ARGS__);
#endif

void f16_to_f32_at(SimdLevel level, const std::uint16_t* in, float* out, std::size_t n) noexcept {
  SPARCOLL_CONVERT_DISPATCH(f16_to_f32, level, in, out, n)
}
void f32_to_f16_at(SimdLevel level, const float* in, std::uint16_t* out, std::size_t n) noexcept {
  SPARCOLL_CONVERT_DISPATCH(f32_to_f16, level, in, out, n)
}
void bf16_to_f32_at(SimdLevel level, const std::uint16_t* in, float* out, std::size_t n) noexcept {
  SPARCOLL_CONVERT_DISPATCH(bf16_to_f32, level, in, out, n)
}
void f32_to_bf16_at(SimdLevel level, const float* in, std::uint16_t* out, std::size_t n) noexcept {
  SPARCOLL_CONVERT_DISPATCH(f32_to_bf16, level, in, out, n)
}

#undef SPARCOLL_CONVERT_DISPATCH

void f16_to_f32(const std::uint16_t* in, float* out, std::size_t n) noexcept { f16_to_f32_at(simd_level(), in, out, n); }
void f32_to_f16(const float* in, std::uint16_t* out, std::size_t n) noexcept { f32_to_f16_at(simd_level(), in, out, n); }
void bf16_to_f32(const std::uint16_t* in, float* out, std::size_t n) noexcept { bf16_to_f32_at(simd_level(), in, out, n); }
void f32_to_bf16(const float* in, std::uint16_t* out, std::size_t n) noexcept { f32_to_bf16_at(simd_level(), in, out, n); }

}  // namespace sparcoll::block
