#include "algo/compress/select_above.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "algo/compress/select_above_kernels.hpp"
#include "block/simd_level.hpp"

namespace sparcoll::algo::compress {
namespace {

std::vector<block::SimdLevel> runnable_levels() {
  std::vector<block::SimdLevel> levels;
  for (const auto level : {block::SimdLevel::scalar, block::SimdLevel::avx2, block::SimdLevel::avx512})
    if (block::simd_level_supported(level)) levels.push_back(level);
  return levels;
}

struct Selection {
  std::vector<std::uint32_t> indices;
  std::vector<float> values;
  std::size_t count = 0;
};

// The rule written out plainly, independent of the kernels.
Selection reference(const std::vector<float>& v, float t, std::size_t capacity) {
  Selection s;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!(std::fabs(v[i]) >= t)) continue;
    if (s.count < capacity) {
      s.indices.push_back(static_cast<std::uint32_t>(i));
      s.values.push_back(v[i]);
    }
    ++s.count;
  }
  return s;
}

Selection run(block::SimdLevel level, const std::vector<float>& v, float t, std::size_t capacity) {
  Selection s;
  s.indices.assign(capacity, 0xdeadbeef);
  s.values.assign(capacity, -1.0f);
  s.count = select_above_kernel(level)(v.data(), v.size(), t, s.indices.data(), s.values.data(), capacity);
  const std::size_t written = std::min(s.count, capacity);
  s.indices.resize(written);
  s.values.resize(written);
  return s;
}

void expect_same(const Selection& want, const Selection& got, const char* what) {
  ASSERT_EQ(want.count, got.count) << what;
  ASSERT_EQ(want.indices, got.indices) << what;
  ASSERT_EQ(want.values.size(), got.values.size()) << what;
  for (std::size_t i = 0; i < want.values.size(); ++i)
    ASSERT_EQ(std::bit_cast<std::uint32_t>(want.values[i]), std::bit_cast<std::uint32_t>(got.values[i])) << what << " at " << i;
}

std::vector<float> normal_values(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

TEST(SelectAbove, EveryLevelMatchesTheRuleAtEverySizeAndDensity) {
  for (const auto level : runnable_levels()) {
    for (std::size_t n : {0u, 1u, 7u, 8u, 9u, 15u, 16u, 17u, 31u, 32u, 33u, 63u, 64u, 65u, 127u, 1000u, 4099u}) {
      const auto v = normal_values(n, static_cast<std::uint32_t>(n) + 1);
      for (float t : {0.0f, 0.5f, 1.5f, 2.5f, 4.0f, std::numeric_limits<float>::infinity()}) {
        const auto want = reference(v, t, n);
        expect_same(want, run(level, v, t, n), block::simd_level_name(level));
      }
    }
  }
}

TEST(SelectAbove, CapacityKeepsTheLowestIndicesAndCountsTheRest) {
  const auto v = normal_values(3000, 7);
  for (const auto level : runnable_levels())
    for (std::size_t capacity : {0u, 1u, 5u, 8u, 15u, 16u, 17u, 100u, 257u, 400u})
      expect_same(reference(v, 1.0f, capacity), run(level, v, 1.0f, capacity), block::simd_level_name(level));
}

TEST(SelectAbove, NanIsNeverSelectedNegativeZeroIsZeroInfIsLargest) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<float> v(70, 0.0f);
  v[3] = nan;
  v[5] = -0.0f;
  v[9] = -inf;
  v[40] = inf;
  v[41] = -nan;
  v[66] = 2.0f;
  for (const auto level : runnable_levels()) {
    const auto at_zero = run(level, v, 0.0f, v.size());
    EXPECT_EQ(at_zero.count, 68u) << "every entry but the two NaNs";
    const auto big = run(level, v, 1.0f, v.size());
    EXPECT_EQ(big.indices, (std::vector<std::uint32_t>{9, 40, 66})) << block::simd_level_name(level);
    const auto infinite = run(level, v, inf, v.size());
    EXPECT_EQ(infinite.indices, (std::vector<std::uint32_t>{9, 40}));
  }
}

TEST(SelectAbove, PublicEntryAndCount) {
  const auto v = normal_values(10000, 3);
  std::vector<std::uint32_t> idx(v.size());
  std::vector<float> val(v.size());
  std::size_t selected = 0, counted = 0;
  ASSERT_TRUE(select_above(v.data(), v.size(), 2.0f, idx.data(), val.data(), idx.size(), &selected).ok());
  ASSERT_TRUE(count_above(v.data(), v.size(), 2.0f, &counted).ok());
  EXPECT_EQ(selected, reference(v, 2.0f, v.size()).count);
  EXPECT_EQ(counted, selected);
}

TEST(SelectAbove, BadArgumentsAreNamed) {
  const float v[4] = {1, 2, 3, 4};
  std::uint32_t idx[4];
  float val[4];
  std::size_t selected = 0;
  Status s = select_above(v, 4, std::numeric_limits<float>::quiet_NaN(), idx, val, 4, &selected);
  EXPECT_EQ(s.code(), ErrorCode::invalid_argument);
  EXPECT_NE(s.message().find("threshold is nan"), std::string::npos) << s.message();
  s = select_above(v, 4, -1.0f, idx, val, 4, &selected);
  EXPECT_NE(s.message().find("negative"), std::string::npos) << s.message();
  s = select_above(nullptr, 4, 1.0f, idx, val, 4, &selected);
  EXPECT_NE(s.message().find("values is null"), std::string::npos) << s.message();
  s = select_above(v, 4, 1.0f, nullptr, val, 4, &selected);
  EXPECT_NE(s.message().find("out_indices or out_values is null"), std::string::npos) << s.message();
  s = count_above(v, std::size_t{1} << 33, 1.0f, &selected);
  EXPECT_NE(s.message().find("32-bit index range"), std::string::npos) << s.message();
  EXPECT_TRUE(select_above(nullptr, 0, 1.0f, nullptr, nullptr, 0, &selected).ok());
  EXPECT_EQ(selected, 0u);
}

}  // namespace
}  // namespace sparcoll::algo::compress
