#include "algo/compress/topk.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

namespace sparcoll::algo::compress {
namespace {

// Reference: a stable sort by decreasing magnitude (ties keep index order), first k, by index.
std::vector<std::uint32_t> reference_topk(const std::vector<float>& v, std::size_t k) {
  std::vector<std::uint32_t> order(v.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) { return std::fabs(v[a]) > std::fabs(v[b]); });
  order.resize(k);
  std::sort(order.begin(), order.end());
  return order;
}

std::vector<std::uint32_t> run_topk(const std::vector<float>& v, std::size_t k, TopkScratch& scratch) {
  std::vector<std::uint32_t> idx(k);
  std::vector<float> val(k);
  const Status s = exact_topk(v.data(), v.size(), k, idx.data(), val.data(), scratch);
  EXPECT_TRUE(s.ok()) << s.to_string();
  for (std::size_t i = 0; i < k; ++i) EXPECT_EQ(val[i], v[idx[i]]);
  return idx;
}

TEST(Topk, MatchesSortedReference) {
  std::mt19937 rng(11);
  std::normal_distribution<float> d;
  TopkScratch scratch;
  for (std::size_t n : {1u, 2u, 10u, 1000u, 65537u}) {
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    for (std::size_t k : {std::size_t{0}, std::size_t{1}, n / 100, n / 3, n - 1, n}) {
      if (k > n) continue;
      EXPECT_EQ(run_topk(v, k, scratch), reference_topk(v, k)) << "n " << n << " k " << k;
      if (k == 0) continue;
      float t = 0;
      ASSERT_TRUE(topk_threshold(v.data(), n, k, &t, scratch).ok());
      const auto ref = reference_topk(v, k);
      float kth = std::numeric_limits<float>::infinity();
      for (auto i : ref) kth = std::min(kth, std::fabs(v[i]));
      EXPECT_EQ(t, kth);
    }
  }
}

TEST(Topk, TiesGoToLowestIndicesAndZerosFillUp) {
  TopkScratch scratch;
  const std::vector<float> ties = {1, -2, 2, 0.5f, -2, 2, 3, 0};
  EXPECT_EQ(run_topk(ties, 3, scratch), (std::vector<std::uint32_t>{1, 2, 6}));
  EXPECT_EQ(run_topk(ties, 5, scratch), (std::vector<std::uint32_t>{1, 2, 4, 5, 6}));
  const std::vector<float> sparse = {0, 0, -0.0f, 5, 0, 0};
  EXPECT_EQ(run_topk(sparse, 3, scratch), (std::vector<std::uint32_t>{0, 1, 3}));
  const std::vector<float> infinite = {1, -std::numeric_limits<float>::infinity(), 7};
  EXPECT_EQ(run_topk(infinite, 1, scratch), (std::vector<std::uint32_t>{1}));
}

TEST(Topk, BadArgumentsAreNamed) {
  TopkScratch scratch;
  std::vector<float> v = {1, 2, std::numeric_limits<float>::quiet_NaN(), 4};
  std::uint32_t idx[8];
  float val[8];
  float t = 0;
  Status s = exact_topk(v.data(), v.size(), 2, idx, val, scratch);
  EXPECT_EQ(s.code(), ErrorCode::invalid_argument);
  EXPECT_NE(s.message().find("index 2 is nan"), std::string::npos) << s.message();
  s = topk_threshold(v.data(), v.size(), 1, &t, scratch);
  EXPECT_NE(s.message().find("index 2 is nan"), std::string::npos) << s.message();
  v[2] = 3;
  s = exact_topk(v.data(), v.size(), 5, idx, val, scratch);
  EXPECT_NE(s.message().find("k = 5 is larger than n = 4"), std::string::npos) << s.message();
  s = topk_threshold(v.data(), v.size(), 0, &t, scratch);
  EXPECT_NE(s.message().find("k = 0 is outside [1, n = 4]"), std::string::npos) << s.message();
  s = exact_topk(v.data(), v.size(), 2, nullptr, val, scratch);
  EXPECT_EQ(s.code(), ErrorCode::invalid_argument);
  EXPECT_TRUE(exact_topk(nullptr, 0, 0, nullptr, nullptr, scratch).ok());
}

TEST(Topk, ScratchKeepsItsCapacity) {
  TopkScratch scratch;
  std::vector<float> v(4096, 1.0f);
  float t = 0;
  ASSERT_TRUE(topk_threshold(v.data(), v.size(), 10, &t, scratch).ok());
  const auto* data = scratch.magnitudes.data();
  ASSERT_TRUE(topk_threshold(v.data(), 1000, 10, &t, scratch).ok());
  ASSERT_TRUE(topk_threshold(v.data(), v.size(), 10, &t, scratch).ok());
  EXPECT_EQ(scratch.magnitudes.data(), data) << "no reallocation once warm";
}

}  // namespace
}  // namespace sparcoll::algo::compress
