#include "algo/compress/threshold_estimator.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "algo/compress/select_above.hpp"

namespace sparcoll::algo::compress {
namespace {

// Synthetic gradients as the research notes suggest for validating Ok-Topk's threshold offline
// (§11): heavy-tailed values (Student-t, 3 degrees of freedom) whose scale drifts slowly
// (AR(1) in log space), with a per-coordinate AR(1) component so supports move slowly too.
class DriftingGradients {
 public:
  explicit DriftingGradients(std::size_t n) : base_(n), value_(n), rng_(5) {
    for (auto& b : base_) b = t_(rng_);
  }
  const std::vector<float>& next() {
    log_scale_ = 0.99 * log_scale_ + 0.01 * normal_(rng_);
    const float scale = static_cast<float>(std::exp(log_scale_));
    for (std::size_t i = 0; i < base_.size(); ++i) {
      base_[i] = 0.9f * base_[i] + 0.436f * t_(rng_);
      value_[i] = scale * base_[i];
    }
    return value_;
  }

 private:
  std::vector<float> base_, value_;
  std::mt19937 rng_;
  std::student_t_distribution<float> t_{3.0f};
  std::normal_distribution<double> normal_;
  double log_scale_ = 0;
};

TEST(ThresholdEstimator, CountsStayNearKWithExactStepsEveryTau) {
  const std::size_t n = 20000, k = 200;
  ThresholdEstimatorConfig config;
  config.k = k;
  config.recompute_every = 32;
  config.band_low = 2.0 / 3.0;
  config.band_high = 5.0 / 4.0;
  ThresholdEstimator est;
  ASSERT_TRUE(ThresholdEstimator::create(config, &est).ok());
  DriftingGradients grads(n);
  TopkScratch scratch;
  std::vector<std::uint32_t> idx(2 * k);
  std::vector<float> val(2 * k);
  int in_band = 0, since_exact = 0;
  const int steps = 320;
  for (int step = 0; step < steps; ++step) {
    const auto& g = grads.next();
    std::size_t selected = 0;
    ASSERT_TRUE(est.select(g.data(), n, idx.data(), val.data(), idx.size(), &selected, scratch).ok());
    ASSERT_LE(selected, idx.size());
    for (std::size_t i = 1; i < selected; ++i) ASSERT_LT(idx[i - 1], idx[i]);
    for (std::size_t i = 0; i < selected; ++i) ASSERT_EQ(val[i], g[idx[i]]);
    if (step % 32 == 0) {
      EXPECT_TRUE(est.last_was_exact()) << "step " << step;
      EXPECT_GE(selected, k);
    }
    since_exact = est.last_was_exact() ? 0 : since_exact + 1;
    ASSERT_LT(since_exact, 32) << "step " << step;
    in_band += selected >= k * 2 / 3 && selected <= k * 5 / 4;
  }
  // Ok-Topk's premise: between exact steps the adapted threshold keeps the count in the band.
  EXPECT_GE(in_band, steps * 9 / 10) << "steps in [2k/3, 5k/4]: " << in_band;
}

TEST(ThresholdEstimator, ReusedThresholdAdaptsOutsideTheBand) {
  ThresholdEstimatorConfig config;
  config.k = 10;
  config.recompute_every = 1000;
  config.lower_factor = 2.0;
  config.raise_factor = 4.0;
  ThresholdEstimator est;
  ASSERT_TRUE(ThresholdEstimator::create(config, &est).ok());
  TopkScratch scratch;
  std::vector<float> v(100);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i + 1);
  float t = 0;
  ASSERT_TRUE(est.exact_due(v.size()));
  ASSERT_TRUE(est.next_threshold(v.data(), v.size(), &t, scratch).ok());
  EXPECT_EQ(t, 91.0f);
  est.observe(10);  // in band: unchanged
  ASSERT_FALSE(est.exact_due(v.size()));
  ASSERT_TRUE(est.next_threshold(v.data(), v.size(), &t, scratch).ok());
  EXPECT_EQ(t, 91.0f);
  EXPECT_FALSE(est.last_was_exact());
  est.observe(2);  // too few: lowered
  ASSERT_TRUE(est.next_threshold(v.data(), v.size(), &t, scratch).ok());
  EXPECT_EQ(t, 45.5f);
  est.observe(50);  // too many: raised
  ASSERT_TRUE(est.next_threshold(v.data(), v.size(), &t, scratch).ok());
  EXPECT_EQ(t, 182.0f);
  est.observe(0);
  EXPECT_TRUE(est.exact_due(50)) << "a new size recomputes";
  est.set_exact(3.0f, v.size());
  ASSERT_TRUE(est.next_threshold(v.data(), v.size(), &t, scratch).ok());
  EXPECT_EQ(t, 3.0f);
  EXPECT_TRUE(est.last_was_exact());
}

TEST(ThresholdEstimator, OverflowNeverExceedsCapacityAndZerosAreNeverSelected) {
  ThresholdEstimatorConfig config;
  config.k = 4;
  config.recompute_every = 100;
  config.overflow_retries = 1;
  ThresholdEstimator est;
  ASSERT_TRUE(ThresholdEstimator::create(config, &est).ok());
  TopkScratch scratch;
  std::vector<std::uint32_t> idx(6);
  std::vector<float> val(6);
  std::size_t selected = 0;
  // Fewer non-zeros than k: the exact threshold is 0, raised to the smallest positive float.
  std::vector<float> sparse(64, 0.0f);
  sparse[7] = 1.0f;
  sparse[9] = -0.0f;
  ASSERT_TRUE(est.select(sparse.data(), sparse.size(), idx.data(), val.data(), idx.size(), &selected, scratch).ok());
  EXPECT_EQ(selected, 1u);
  EXPECT_EQ(idx[0], 7u);
  // Now everything is large: the reused tiny threshold would select 64; one raise is not
  // enough, so the exact top-k (4 entries) is taken.
  std::vector<float> dense(64);
  for (std::size_t i = 0; i < dense.size(); ++i) dense[i] = 100.0f + static_cast<float>(i);
  ASSERT_TRUE(est.select(dense.data(), dense.size(), idx.data(), val.data(), idx.size(), &selected, scratch).ok());
  EXPECT_EQ(selected, 4u);
  EXPECT_EQ(idx[0], 60u);
  EXPECT_TRUE(est.last_was_exact());
  EXPECT_EQ(est.threshold(), 160.0f) << "the exact 4th magnitude, in band after the fallback";
}

TEST(ThresholdEstimator, BadConfigAndCapacityAreNamed) {
  ThresholdEstimator est;
  ThresholdEstimatorConfig config;
  Status s = ThresholdEstimator::create(config, &est);
  EXPECT_NE(s.message().find("k = 0"), std::string::npos) << s.message();
  config.k = 5;
  config.recompute_every = 0;
  s = ThresholdEstimator::create(config, &est);
  EXPECT_NE(s.message().find("recompute_every"), std::string::npos) << s.message();
  config.recompute_every = 8;
  config.raise_factor = 1.0;
  s = ThresholdEstimator::create(config, &est);
  EXPECT_NE(s.message().find("raise_factor"), std::string::npos) << s.message();
  config.raise_factor = 1.1;
  config.band_low = 1.5;
  s = ThresholdEstimator::create(config, &est);
  EXPECT_NE(s.message().find("band_low"), std::string::npos) << s.message();
  config.band_low = 0.5;
  ASSERT_TRUE(ThresholdEstimator::create(config, &est).ok());
  TopkScratch scratch;
  std::vector<float> v(10, 1.0f);
  std::uint32_t idx[4];
  float val[4];
  std::size_t selected = 0;
  s = est.select(v.data(), v.size(), idx, val, 4, &selected, scratch);
  EXPECT_NE(s.message().find("capacity 4 is below k = 5"), std::string::npos) << s.message();
  std::uint32_t idx8[8];
  float val8[8];
  s = est.select(v.data(), 3, idx8, val8, 8, &selected, scratch);
  EXPECT_NE(s.message().find("k = 5 is larger than n = 3"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace sparcoll::algo::compress
