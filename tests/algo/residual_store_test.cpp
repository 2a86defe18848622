#include "algo/compress/residual_store.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "algo/compress/topk.hpp"

namespace sparcoll::algo::compress {
namespace {

TEST(ResidualStore, AccumulatedIsSentPlusResidualExactlyOverManySteps) {
  const std::size_t n = 5000, k = 50;
  ResidualStore store;
  TopkScratch scratch;
  std::mt19937 rng(9);
  std::normal_distribution<float> d;
  std::vector<float> grad(n), acc_copy(n), rebuilt(n);
  std::vector<std::uint32_t> idx(k);
  std::vector<float> val(k);
  std::vector<double> total_grad(n, 0.0), total_sent(n, 0.0);
  for (int step = 0; step < 200; ++step) {
    for (auto& g : grad) g = d(rng);
    float* acc = nullptr;
    ASSERT_TRUE(store.accumulate(42, grad.data(), n, &acc).ok());
    acc_copy.assign(acc, acc + n);
    ASSERT_TRUE(exact_topk(acc, n, k, idx.data(), val.data(), scratch).ok());
    ASSERT_TRUE(store.keep_unsent(42, idx.data(), k).ok());
    const float* residual = store.residual(42);
    rebuilt.assign(residual, residual + n);
    for (std::size_t j = 0; j < k; ++j) {
      EXPECT_EQ(rebuilt[idx[j]], 0.0f);
      rebuilt[idx[j]] += val[j];
      total_sent[idx[j]] += val[j];
    }
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(std::bit_cast<std::uint32_t>(rebuilt[i]), std::bit_cast<std::uint32_t>(acc_copy[i]))
          << "step " << step << " index " << i;
      total_grad[i] += grad[i];
    }
  }
  // Nothing is lost, only delayed: all gradients = all sent + what is still kept (up to the
  // fp32 rounding of the running additions).
  const float* residual = store.residual(42);
  for (std::size_t i = 0; i < n; ++i) EXPECT_NEAR(total_grad[i], total_sent[i] + residual[i], 1e-3) << i;
}

TEST(ResidualStore, IdsAreIndependentAndBadCallsAreNamed) {
  ResidualStore store;
  std::vector<float> a(8, 1.0f), b(3, 2.0f);
  float* acc = nullptr;
  ASSERT_TRUE(store.accumulate(1, a.data(), a.size(), &acc).ok());
  ASSERT_TRUE(store.accumulate(2, b.data(), b.size(), &acc).ok());
  ASSERT_TRUE(store.accumulate(1, a.data(), a.size(), &acc).ok());
  EXPECT_EQ(acc[0], 2.0f);
  EXPECT_EQ(store.size(), 2u);
  Status s = store.accumulate(2, a.data(), a.size(), &acc);
  EXPECT_EQ(s.code(), ErrorCode::invalid_argument);
  EXPECT_NE(s.message().find("tensor id 2 has 3 values, this step gives 8"), std::string::npos) << s.message();
  const std::uint32_t bad[] = {0, 9};
  s = store.keep_unsent(1, bad, 2);
  EXPECT_NE(s.message().find("sent index 9 (position 1) is out of range for 8 values"), std::string::npos) << s.message();
  EXPECT_EQ(store.residual(1)[0], 2.0f) << "a rejected call changes nothing";
  s = store.keep_unsent(77, bad, 1);
  EXPECT_NE(s.message().find("tensor id 77 before any accumulate"), std::string::npos) << s.message();
  EXPECT_TRUE(store.clear(1));
  EXPECT_EQ(store.residual(1)[3], 0.0f);
  EXPECT_TRUE(store.erase(2));
  EXPECT_FALSE(store.erase(2));
  EXPECT_EQ(store.residual(2), nullptr);
  ASSERT_TRUE(store.accumulate(2, a.data(), a.size(), &acc).ok()) << "an erased id starts over";
}

}  // namespace
}  // namespace sparcoll::algo::compress
