#include "block/cpu_features.hpp"

#include <gtest/gtest.h>

#include "block/simd_level.hpp"

namespace sparcoll::block {
namespace {

TEST(BlockCpuFeatures, LevelMatchesFeatures) {
  const CpuFeatures& f = cpu_features();
  const SimdLevel level = simd_level();
  EXPECT_TRUE(simd_level_supported(level));
  EXPECT_TRUE(simd_level_supported(SimdLevel::scalar));
  EXPECT_EQ(level >= SimdLevel::avx2, f.avx2 && f.f16c);
  EXPECT_EQ(level == SimdLevel::avx512, f.avx2 && f.f16c && f.avx512f && f.avx512bw);
}

TEST(BlockCpuFeatures, ParsesSimdLevelNames) {
  SimdLevel level = SimdLevel::avx512;
  EXPECT_TRUE(parse_simd_level("scalar", &level));
  EXPECT_EQ(level, SimdLevel::scalar);
  EXPECT_TRUE(parse_simd_level("avx2", &level));
  EXPECT_EQ(level, SimdLevel::avx2);
  EXPECT_TRUE(parse_simd_level("avx512", &level));
  EXPECT_EQ(level, SimdLevel::avx512);
  EXPECT_FALSE(parse_simd_level("AVX2", &level));
  EXPECT_FALSE(parse_simd_level("sse", &level));
  EXPECT_FALSE(parse_simd_level("", &level));
  EXPECT_EQ(level, SimdLevel::avx512);  // untouched on failure
}

}  // namespace
}  // namespace sparcoll::block
