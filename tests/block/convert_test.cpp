#include "block/convert.hpp"

#include <gtest/gtest.h>
#include <immintrin.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "block/convert_kernels.hpp"
#include "simd_levels.hpp"

namespace sparcoll::block {
namespace {

using test::runnable_levels;

std::uint32_t bits_of(float f) { return std::bit_cast<std::uint32_t>(f); }
float float_of(std::uint32_t u) { return std::bit_cast<float>(u); }

// The F16C instructions for one value: an oracle for the scalar fp16 code that shares nothing
// with it (the build baseline, x86-64-v3, has F16C).
float f16c_to_f32(std::uint16_t h) { return _cvtsh_ss(h); }
std::uint16_t f16c_from_f32(float f) { return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }

// bf16 rounding from first principles: scale to units of the bf16 ulp at x's binade, round in
// double (exact: at most 9 significant bits), scale back. Subnormal floats share the smallest
// binade's ulp; a rounded magnitude of 2^128 or more is Inf.
std::uint16_t reference_f32_to_bf16(float f) {
  const std::uint32_t x = bits_of(f);
  if (std::isnan(f)) return static_cast<std::uint16_t>((x >> 16) | 0x0040u);
  if (std::isinf(f) || f == 0.0f) return static_cast<std::uint16_t>(x >> 16);
  int exp = 0;
  std::frexp(static_cast<double>(f), &exp);  // |f| in [2^(exp-1), 2^exp)
  const int binade = std::max(exp - 1, -126);
  const double ulp = std::ldexp(1.0, binade - 7);
  const double rounded = std::nearbyint(static_cast<double>(f) / ulp) * ulp;
  if (std::fabs(rounded) >= std::ldexp(1.0, 128)) return static_cast<std::uint16_t>((x >> 16 & 0x8000u) | 0x7f80u);
  return static_cast<std::uint16_t>(bits_of(static_cast<float>(rounded)) >> 16);
}

bool half_is_nan(std::uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }

// fp32 inputs that stress narrowing: random bit patterns (every class: NaN, Inf, subnormal),
// exact ties and their neighbours for both half formats, the fp16 overflow edge, fp16
// subnormals and values below half the smallest one.
std::vector<float> narrowing_inputs() {
  std::vector<float> v;
  std::mt19937 rng(2024);
  for (int i = 0; i < 1 << 20; ++i) v.push_back(float_of(rng()));
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const std::uint32_t hi = h << 16;  // bf16 ties and neighbours
    for (const std::uint32_t low : {0x7fffu, 0x8000u, 0x8001u, 0x0001u, 0xffffu}) v.push_back(float_of(hi | low));
  }
  for (std::uint32_t h = 0; h < 0x7c00; ++h) {  // fp16 ties between consecutive finite halves
    const float a = f16c_to_f32(static_cast<std::uint16_t>(h));
    const float b = f16c_to_f32(static_cast<std::uint16_t>(h + 1));
    const float mid = static_cast<float>((static_cast<double>(a) + b) / 2);  // exact in fp32
    for (const float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)}) {
      v.push_back(x);
      v.push_back(-x);
    }
  }
  for (const float x : {65504.0f, 65519.0f, 65519.996f, 65520.0f, 65535.0f, 65536.0f, 1e10f, 5.96e-8f, 2.98e-8f,
                        2.9802322e-08f, 2.9802326e-08f, 1e-10f, 1e-45f, 6.1035156e-05f, 6.1035e-05f})
    for (const float s : {x, -x}) v.push_back(s);
  return v;
}

TEST(BlockConvert, F16ToF32ExhaustiveScalarMatchesF16c) {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const auto half = static_cast<std::uint16_t>(h);
    ASSERT_EQ(bits_of(f16_to_f32(half)), bits_of(f16c_to_f32(half))) << std::hex << "half 0x" << h;
  }
}

TEST(BlockConvert, F16RoundTripsExhaustively) {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const auto half = static_cast<std::uint16_t>(h);
    const std::uint16_t back = f32_to_f16(f16_to_f32(half));
    // NaNs come back quiet (0x200 set) with sign and payload; every other value exactly.
    const std::uint16_t want = half_is_nan(half) ? static_cast<std::uint16_t>(half | 0x200u) : half;
    ASSERT_EQ(back, want) << std::hex << "half 0x" << h;
  }
}

TEST(BlockConvert, F32ToF16ScalarMatchesF16c) {
  for (const float x : narrowing_inputs())
    ASSERT_EQ(f32_to_f16(x), f16c_from_f32(x)) << std::hex << "f32 0x" << bits_of(x);
}

TEST(BlockConvert, Bf16ToF32ExhaustiveIsAShift) {
  for (std::uint32_t h = 0; h < 0x10000; ++h)
    ASSERT_EQ(bits_of(bf16_to_f32(static_cast<std::uint16_t>(h))), h << 16) << std::hex << "bf16 0x" << h;
}

TEST(BlockConvert, F32ToBf16ScalarMatchesReference) {
  for (const float x : narrowing_inputs())
    ASSERT_EQ(f32_to_bf16(x), reference_f32_to_bf16(x)) << std::hex << "f32 0x" << bits_of(x);
  // Spot checks of the rules themselves.
  EXPECT_EQ(f32_to_bf16(float_of(0x3f808000u)), 0x3f80u);  // tie, even stays
  EXPECT_EQ(f32_to_bf16(float_of(0x3f818000u)), 0x3f82u);  // tie, odd rounds up
  EXPECT_EQ(f32_to_bf16(float_of(0x7f7fffffu)), 0x7f80u);  // FLT_MAX overflows to Inf
  EXPECT_EQ(f32_to_bf16(float_of(0x7f800001u)), 0x7fc0u);  // NaN with a low payload stays NaN
  EXPECT_EQ(f32_to_bf16(float_of(0xff800000u)), 0xff80u);  // -Inf
}

TEST(BlockConvert, EveryLevelMatchesScalarBitForBit) {
  std::vector<std::uint16_t> halves(0x10000);
  for (std::uint32_t h = 0; h < 0x10000; ++h) halves[h] = static_cast<std::uint16_t>(h);
  const std::vector<float> floats = narrowing_inputs();
  for (const SimdLevel level : runnable_levels()) {
    SCOPED_TRACE(simd_level_name(level));
    // Whole arrays (vector bodies), then short lengths at odd offsets (tails, masks).
    std::vector<float> wide(halves.size());
    f16_to_f32_at(level, halves.data(), wide.data(), halves.size());
    for (std::size_t i = 0; i < halves.size(); ++i) ASSERT_EQ(bits_of(wide[i]), bits_of(f16_to_f32(halves[i]))) << i;
    bf16_to_f32_at(level, halves.data(), wide.data(), halves.size());
    for (std::size_t i = 0; i < halves.size(); ++i) ASSERT_EQ(bits_of(wide[i]), bits_of(bf16_to_f32(halves[i]))) << i;

    std::vector<std::uint16_t> narrow(floats.size());
    f32_to_f16_at(level, floats.data(), narrow.data(), floats.size());
    for (std::size_t i = 0; i < floats.size(); ++i) ASSERT_EQ(narrow[i], f32_to_f16(floats[i])) << i;
    f32_to_bf16_at(level, floats.data(), narrow.data(), floats.size());
    for (std::size_t i = 0; i < floats.size(); ++i) ASSERT_EQ(narrow[i], f32_to_bf16(floats[i])) << i;

    for (std::size_t n = 0; n <= 40; ++n) {
      const std::size_t off = 3 * n + 1;
      std::vector<float> w(n + 1, -1.0f);
      std::vector<std::uint16_t> h(n + 1, 0xabcd);
      f16_to_f32_at(level, halves.data() + 0x3c00 + off, w.data(), n);
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(bits_of(w[i]), bits_of(f16_to_f32(halves[0x3c00 + off + i])));
      EXPECT_EQ(w[n], -1.0f) << "wrote past n=" << n;
      f32_to_bf16_at(level, floats.data() + off, h.data(), n);
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(h[i], f32_to_bf16(floats[off + i]));
      EXPECT_EQ(h[n], 0xabcd) << "wrote past n=" << n;
      f32_to_f16_at(level, floats.data() + off, h.data(), n);
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(h[i], f32_to_f16(floats[off + i]));
      EXPECT_EQ(h[n], 0xabcd) << "wrote past n=" << n;
    }
  }
}

TEST(BlockConvert, PublicArrayFormsUseAWorkingLevel) {
  const std::uint16_t in[3] = {0x3c00, 0xc000, 0x7c00};
  float out[3];
  f16_to_f32(in, out, 3);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -2.0f);
  EXPECT_TRUE(std::isinf(out[2]));
  std::uint16_t back[3];
  f32_to_f16(out, back, 3);
  EXPECT_EQ(back[1], 0xc000);
  f32_to_bf16(out, back, 3);
  EXPECT_EQ(back[0], 0x3f80);
  bf16_to_f32(back, out, 3);
  EXPECT_EQ(out[1], -2.0f);
}

}  // namespace
}  // namespace sparcoll::block
