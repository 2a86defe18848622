#include "algo/compress/qsgd.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "algo/compress/qsgd_kernels.hpp"
#include "block/simd_level.hpp"

namespace sparcoll::algo::compress {
namespace {

std::size_t encoded_bytes(std::size_t n, unsigned bits, std::size_t bucket) {
  std::size_t bytes = 0;
  const Status s = qsgd_encoded_bytes(n, bits, bucket, &bytes);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return bytes;
}

std::vector<std::byte> encode(const std::vector<float>& v, unsigned bits, std::size_t bucket, std::uint64_t seed) {
  std::vector<std::byte> out(encoded_bytes(v.size(), bits, bucket));
  const Status s = qsgd_encode(v.data(), v.size(), bits, bucket, seed, out.data(), out.size());
  EXPECT_TRUE(s.ok()) << s.to_string();
  return out;
}

std::vector<float> decode(const std::vector<std::byte>& e, std::size_t n, unsigned bits, std::size_t bucket) {
  std::vector<float> out(n, 0.0f);
  const Status s = qsgd_decode_add(e.data(), e.size(), n, bits, bucket, out.data());
  EXPECT_TRUE(s.ok()) << s.to_string();
  return out;
}

constexpr unsigned kAllBits[] = {2, 4, 8};
unsigned levels_of(unsigned bits) { return (1u << (bits - 1)) - 1; }

std::vector<float> normal_values(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

TEST(Qsgd, EncodedSize) {
  EXPECT_EQ(encoded_bytes(0, 8, 1024), 0u);
  EXPECT_EQ(encoded_bytes(1, 2, 1024), 5u);
  EXPECT_EQ(encoded_bytes(1024, 8, 1024), 4u + 1024u);
  EXPECT_EQ(encoded_bytes(1025, 4, 1024), 4u + 512u + 4u + 1u);
  EXPECT_EQ(encoded_bytes(1023, 2, 1024), 4u + 256u);
  EXPECT_EQ(encoded_bytes(10, 2, 3), 4 * (4u + 1u));
}

// Values on the levels, with scale / s a power of two, need no randomness: exact round trip.
TEST(Qsgd, ValuesOnLevelsRoundTripExactly) {
  std::mt19937 rng(1);
  for (unsigned bits : kAllBits) {
    const unsigned s = levels_of(bits);
    for (std::size_t n : {1u, 2u, 3u, 1023u, 1024u, 1025u, 3001u}) {
      for (std::size_t bucket : {std::size_t{1024}, std::size_t{5}, std::size_t{1}}) {
        std::vector<float> v(n);
        for (std::size_t i = 0; i < n; ++i) {
          const float unit = std::ldexp(1.0f, static_cast<int>(i / bucket % 20) - 10);  // per bucket
          const auto level = static_cast<int>(rng() % (s + 1));
          v[i] = (rng() & 1 ? -1.0f : 1.0f) * static_cast<float>(level) * unit;
          // The first value of every bucket is the largest: the scale is s * unit.
          if (i % bucket == 0) v[i] = static_cast<float>(s) * unit;
        }
        for (std::uint64_t seed : {0ull, 12345ull}) {
          const auto d = decode(encode(v, bits, bucket, seed), n, bits, bucket);
          for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(d[i], v[i]) << bits << " bits, n " << n << " bucket " << bucket << " i " << i;
        }
      }
    }
  }
}

TEST(Qsgd, SizesZeroOneAndOddTails) {
  for (unsigned bits : kAllBits) {
    for (std::size_t n : {0u, 1u, 2u, 3u, 5u, 1023u, 1024u, 1025u, 2047u, 4097u}) {
      const auto v = normal_values(n, static_cast<std::uint32_t>(n));
      const auto e = encode(v, bits, kQsgdDefaultBucket, 3);
      const auto d = decode(e, n, bits, kQsgdDefaultBucket);
      for (std::size_t b = 0; b * kQsgdDefaultBucket < n; ++b) {
        const std::size_t first = b * kQsgdDefaultBucket, last = std::min(n, first + kQsgdDefaultBucket);
        float scale = 0;
        for (std::size_t i = first; i < last; ++i) scale = std::max(scale, std::fabs(v[i]));
        const float step = scale / static_cast<float>(levels_of(bits));
        for (std::size_t i = first; i < last; ++i) {
          // One level step at most, and never the wrong sign.
          ASSERT_LE(std::fabs(d[i] - v[i]), step * 1.0001f) << bits << " bits n " << n << " i " << i;
          ASSERT_TRUE(d[i] == 0.0f || std::signbit(d[i]) == std::signbit(v[i]));
        }
      }
      if (n == 1) {
        EXPECT_EQ(d[0], v[0]) << "a lone value is its bucket's scale";
      }
    }
  }
}

TEST(Qsgd, ZerosEncodeToZeroAndTheSeedIsTheOnlyRandomness) {
  std::vector<float> zeros(100, 0.0f);
  zeros[3] = -0.0f;
  for (unsigned bits : kAllBits) {
    const auto e = encode(zeros, bits, 64, 9);
    for (std::size_t i = 0; i < e.size(); ++i) ASSERT_EQ(e[i], std::byte{0}) << "zero scale, zero codes, no -0";
  }
  const auto v = normal_values(5000, 2);
  EXPECT_EQ(encode(v, 4, 1024, 77), encode(v, 4, 1024, 77));
  EXPECT_NE(encode(v, 4, 1024, 77), encode(v, 4, 1024, 78));
  // Splitting on bucket boundaries gives the same bytes, except for the bucket numbering: an
  // encoding of the second half alone numbers its buckets from 0, so compare a split at bucket
  // 0 (the first half is a prefix).
  const std::vector<float> half(v.begin(), v.begin() + 2048);
  const auto whole = encode(v, 4, 1024, 77), prefix = encode(half, 4, 1024, 77);
  EXPECT_TRUE(std::equal(prefix.begin(), prefix.end(), whole.begin()));
}

TEST(Qsgd, DecodeAddsIntoTheAccumulator) {
  const auto v = normal_values(3000, 8);
  const auto e = encode(v, 8, 1024, 1);
  const auto d = decode(e, v.size(), 8, 1024);
  std::vector<float> acc(v.size(), 1.5f);
  ASSERT_TRUE(qsgd_decode_add(e.data(), e.size(), v.size(), 8, 1024, acc.data()).ok());
  for (std::size_t i = 0; i < v.size(); ++i) ASSERT_EQ(acc[i], 1.5f + d[i]);
}

// Unbiasedness. For one value, each decode lies in [l, l+1] * step (step = scale / s) with
// E = v, so by Hoeffding the mean over S independent seeds satisfies
//   P(|mean - v| >= t) <= 2 exp(-2 S t^2 / step^2).
// With t = step * sqrt(ln(2 / delta) / (2 S)) and delta = 1e-9 per value, a failure over the
// 3000 values checked is below 3e-6 (and the seeds are fixed, so the test is deterministic).
// The summed error over all values is checked the same way (Hoeffding over all n * S independent
// draws: bound sqrt(sum of step^2) * z), which is about sqrt(n) times tighter per value.
TEST(Qsgd, UnbiasedOverSeeds) {
  const std::size_t n = 3000, seeds = 2000;
  const auto v = normal_values(n, 21);
  for (unsigned bits : kAllBits) {
    std::vector<double> sum(n, 0.0);
    std::vector<float> acc(n);
    std::vector<std::byte> e(encoded_bytes(n, bits, 1024));
    for (std::uint64_t seed = 0; seed < seeds; ++seed) {
      ASSERT_TRUE(qsgd_encode(v.data(), n, bits, 1024, seed, e.data(), e.size()).ok());
      std::fill(acc.begin(), acc.end(), 0.0f);
      ASSERT_TRUE(qsgd_decode_add(e.data(), e.size(), n, bits, 1024, acc.data()).ok());
      for (std::size_t i = 0; i < n; ++i) sum[i] += acc[i];
    }
    const double z = std::sqrt(std::log(2.0 / 1e-9) / (2.0 * seeds));
    double total_error = 0, step_sq_sum = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t first = i / 1024 * 1024, last = std::min(n, first + 1024);
      double scale = 0;
      for (std::size_t j = first; j < last; ++j) scale = std::max(scale, static_cast<double>(std::fabs(v[j])));
      const double step = scale / levels_of(bits);
      const double mean = sum[i] / seeds;
      ASSERT_LE(std::fabs(mean - v[i]), step * z) << bits << " bits, value " << i;
      total_error += mean - v[i];
      step_sq_sum += step * step;
    }
    EXPECT_LE(std::fabs(total_error), std::sqrt(step_sq_sum) * z) << bits << " bits";
  }
}

// Variance. A value at fractional position p between its levels has variance step^2 p (1 - p)
// <= step^2 / 4. The empirical mean squared error over seeds must match the exact variance
// (sum over values) within a few percent, and stay under the bound m * scale^2 / (4 s^2).
TEST(Qsgd, VarianceMatchesTheoryAndItsBound) {
  const std::size_t n = 1024, seeds = 400;
  const auto v = normal_values(n, 33);
  double scale = 0;
  for (float x : v) scale = std::max(scale, static_cast<double>(std::fabs(x)));
  for (unsigned bits : kAllBits) {
    const double step = scale / levels_of(bits);
    double theory = 0;
    for (float x : v) {
      const double pos = std::fabs(x) / step, p = pos - std::floor(pos);
      theory += step * step * p * (1 - p);
    }
    double sq = 0;
    for (std::uint64_t seed = 0; seed < seeds; ++seed) {
      const auto d = decode(encode(v, bits, 1024, 1000 + seed), n, bits, 1024);
      for (std::size_t i = 0; i < n; ++i) sq += (static_cast<double>(d[i]) - v[i]) * (static_cast<double>(d[i]) - v[i]);
    }
    const double measured = sq / seeds;
    EXPECT_NEAR(measured, theory, theory * 0.05) << bits << " bits";
    EXPECT_LE(measured, n * scale * scale / (4.0 * levels_of(bits) * levels_of(bits))) << bits << " bits";
  }
}

TEST(Qsgd, TinyAndHugeScales) {
  for (float unit : {std::numeric_limits<float>::denorm_min(), 1e-40f, 1e-30f, 1e30f}) {
    std::vector<float> v = {unit, -unit, 0.0f, unit * 0.5f};
    const auto d = decode(encode(v, 8, 1024, 5), v.size(), 8, 1024);
    EXPECT_EQ(d[0], v[0]) << unit;
    EXPECT_EQ(d[1], v[1]) << unit;
    EXPECT_EQ(d[2], 0.0f);
    EXPECT_LE(std::fabs(d[3]), unit) << unit;
  }
  std::vector<float> big = {std::numeric_limits<float>::max(), -std::numeric_limits<float>::max()};
  const auto d = decode(encode(big, 2, 1024, 5), 2, 2, 1024);
  EXPECT_EQ(d[0], big[0]);
  EXPECT_EQ(d[1], big[1]);
}

// The SIMD kernels run the scalar reference's fp32 operations in the same order: same bytes,
// same sums, at every width, for tails of every length and for tiny scales.
TEST(Qsgd, EveryLevelMatchesTheScalarKernelBitForBit) {
  if (!block::simd_level_supported(block::SimdLevel::avx2)) GTEST_SKIP() << "no AVX2";
  auto v = normal_values(1024 + 77, 5);
  for (std::size_t i = 0; i < 40; ++i) v[i * 13] = 0.0f;
  v[100] = -0.0f;
  for (unsigned bits : kAllBits) {
    for (std::size_t m : {1u, 7u, 8u, 9u, 63u, 64u, 65u, 1101u}) {
      for (float scale_mul : {1.0f, 1e-38f}) {
        std::vector<float> x(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(m));
        float scale = 0;
        for (auto& e : x) scale = std::max(scale, std::fabs(e *= scale_mul));
        const float fs = static_cast<float>(levels_of(bits));
        const float pre = scale < 0x1p-100f ? 0x1p64f : 1.0f;
        const EncodeParams ep{pre, fs / (scale * pre), bucket_key(99, 3)};
        const DecodeParams dp = scale < 0x1p-100f ? DecodeParams{scale * 0x1p64f / fs, 0x1p-64f, scale}
                                                  : DecodeParams{scale / fs, 1.0f, scale};
        const std::size_t nbytes = (m * bits + 7) / 8;
        std::vector<unsigned char> a(nbytes, 0xaa), b(nbytes, 0x55);
        qsgd_encode_kernel(block::SimdLevel::scalar, bits)(x.data(), 0, m, ep, a.data());
        qsgd_encode_kernel(block::SimdLevel::avx2, bits)(x.data(), 0, m, ep, b.data());
        ASSERT_EQ(a, b) << bits << " bits, m " << m;
        std::vector<float> da(m, 0.25f), db(m, 0.25f);
        qsgd_decode_add_kernel(block::SimdLevel::scalar, bits)(a.data(), 0, m, dp, da.data());
        qsgd_decode_add_kernel(block::SimdLevel::avx2, bits)(a.data(), 0, m, dp, db.data());
        for (std::size_t i = 0; i < m; ++i)
          ASSERT_EQ(std::bit_cast<std::uint32_t>(da[i]), std::bit_cast<std::uint32_t>(db[i])) << bits << " bits, i " << i;
      }
    }
  }
}

TEST(Qsgd, BadArgumentsAreNamed) {
  std::size_t bytes = 0;
  for (unsigned bits : {0u, 1u, 3u, 16u, 32u}) {
    const Status s = qsgd_encoded_bytes(10, bits, 1024, &bytes);
    EXPECT_EQ(s.code(), ErrorCode::invalid_argument);
    EXPECT_NE(s.message().find("bits = " + std::to_string(bits) + " is not one of 2, 4, 8"), std::string::npos) << s.message();
  }
  Status s = qsgd_encoded_bytes(10, 4, 0, &bytes);
  EXPECT_NE(s.message().find("bucket = 0 is outside"), std::string::npos) << s.message();
  std::vector<float> v = {1, 2, std::numeric_limits<float>::infinity(), 4};
  std::vector<std::byte> out(64);
  s = qsgd_encode(v.data(), v.size(), 8, 2, 1, out.data(), out.size());
  EXPECT_NE(s.message().find("value at index 2 (bucket 1) is inf"), std::string::npos) << s.message();
  v[2] = std::numeric_limits<float>::quiet_NaN();
  s = qsgd_encode(v.data(), v.size(), 8, 2, 1, out.data(), out.size());
  EXPECT_NE(s.message().find("index 2 (bucket 1) is nan"), std::string::npos) << s.message();
  v[2] = 3;
  s = qsgd_encode(v.data(), v.size(), 8, 1024, 1, out.data(), 7);
  EXPECT_NE(s.message().find("output has 7 bytes, 4 values at 8 bits need 8"), std::string::npos) << s.message();
  s = qsgd_encode(v.data(), v.size(), 3, 1024, 1, out.data(), out.size());
  EXPECT_NE(s.message().find("bits = 3"), std::string::npos) << s.message();
  s = qsgd_encode(v.data(), v.size(), 8, 0, 1, out.data(), out.size());
  EXPECT_NE(s.message().find("bucket = 0"), std::string::npos) << s.message();

  auto e = encode(v, 4, 2, 1);
  std::vector<float> acc(4, 7.0f);
  s = qsgd_decode_add(e.data(), e.size() - 1, 4, 4, 2, acc.data());
  EXPECT_NE(s.message().find("are not an encoding of 4 values"), std::string::npos) << s.message();
  s = qsgd_decode_add(e.data(), e.size(), 4, 16, 2, acc.data());
  EXPECT_NE(s.message().find("bits = 16"), std::string::npos) << s.message();
  const float bad_scale = -1.0f;
  std::memcpy(e.data() + 5, &bad_scale, 4);  // bucket 1's scale (bucket 0: 4 + 1 bytes)
  s = qsgd_decode_add(e.data(), e.size(), 4, 4, 2, acc.data());
  EXPECT_NE(s.message().find("bucket 1 has scale -1"), std::string::npos) << s.message();
  for (float a : acc) EXPECT_EQ(a, 7.0f) << "a rejected encoding adds nothing";
}

}  // namespace
}  // namespace sparcoll::algo::compress
