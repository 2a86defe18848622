// The hybrid's plan: sampled stripe densities, and the rule that makes a stripe dense.
#include "algo/hybrid_plan.hpp"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace sparcoll::algo {
namespace {

constexpr std::uint32_t kBlock = 256;

// A tensor of nblocks blocks (the last one `tail` elements short) whose block b is non-zero when
// nonzero(b); a non-zero block has one non-zero element, at its end, the last place a scan looks.
template <typename F>
std::vector<float> tensor(std::uint64_t nblocks, std::uint32_t tail, F nonzero) {
  std::vector<float> t(nblocks * kBlock - tail, 0.0f);
  for (std::uint64_t b = 0; b < nblocks; ++b)
    if (nonzero(b)) t[std::min<std::size_t>((b + 1) * kBlock, t.size()) - 1] = 1.0f;
  return t;
}

TEST(HybridPlan, StripesAreWholeBitmapWordsOfAtLeast512BlocksAndAtMost64) {
  EXPECT_EQ(stripe_blocks_for(0), 512u);
  EXPECT_EQ(stripe_blocks_for(1000), 512u);
  EXPECT_EQ(stripe_blocks_for(64 * 512), 512u);
  EXPECT_EQ(stripe_blocks_for(64 * 512 + 1), 576u);  // 513 rounded up to whole words
  const std::uint64_t big = std::uint64_t{1} << 30;
  EXPECT_LE((big + stripe_blocks_for(big) - 1) / stripe_blocks_for(big), 64u);
}

TEST(HybridPlan, SampledCountsAreExactForShortStripesAndFullOrEmptyOnes) {
  // 3 stripes of 512 blocks and a last one of 20 (every block of it sampled); the tensor's last
  // block is short.
  const std::uint64_t nblocks = 3 * 512 + 20;
  const auto t = tensor(nblocks, 100, [](std::uint64_t b) { return b < 512 || (b >= 3 * 512 && b % 3 == 0); });
  std::vector<std::uint32_t> counts(4, 99);
  sample_stripe_counts(t.data(), t.size(), DataType::f32, kBlock, 512, counts.data());
  EXPECT_EQ(counts[0], 512u);  // full
  EXPECT_EQ(counts[1], 0u);    // empty
  EXPECT_EQ(counts[2], 0u);
  EXPECT_EQ(counts[3], 7u);    // blocks 1536, 1539, ..., 1554 of its 20: exact
}

TEST(HybridPlan, SampledCountsEstimateARandomStripesDensity) {
  std::mt19937_64 rng(7);
  std::bernoulli_distribution pick(0.3);
  std::vector<bool> nonzero(64 * 512);
  for (std::size_t b = 0; b < nonzero.size(); ++b) nonzero[b] = pick(rng);
  const auto t = tensor(nonzero.size(), 0, [&](std::uint64_t b) { return nonzero[b]; });
  std::vector<std::uint32_t> counts(64);
  sample_stripe_counts(t.data(), t.size(), DataType::f32, kBlock, 512, counts.data());
  double mean = 0;
  for (std::uint32_t c : counts) {
    EXPECT_LE(c, 512u);
    mean += c / 512.0 / counts.size();
  }
  EXPECT_NEAR(mean, 0.3, 0.03);  // 2048 samples in all
}

TEST(HybridPlan, AStripeGoesDenseAtTheUnionDensityThreshold) {
  // 2 ranks, 3 stripes of 100 blocks: union densities 1-(0.8*0.8) = 36%, 1-(0.7*0.8) = 44%, and
  // 100% (one rank full).
  const std::uint32_t counts[] = {20, 30, 100, /* rank 1 */ 20, 20, 0};
  std::vector<std::uint64_t> dense;
  plan_dense_stripes(counts, 2, 3, 300, 100, 40, &dense);
  ASSERT_EQ(dense.size(), 1u);
  EXPECT_EQ(dense[0], 0b110u);
  plan_dense_stripes(counts, 2, 3, 300, 100, 0, &dense);
  EXPECT_EQ(dense[0], 0b111u);  // 0: every stripe dense
  plan_dense_stripes(counts, 2, 3, 300, 100, 101, &dense);
  EXPECT_EQ(dense[0], 0u);      // above 100: none
}

TEST(HybridPlan, BlockRecursiveDoublingWhenItsEstimatedBytesAreAFractionOfTheRings) {
  // One stripe of 100 blocks per rank. 2 ranks at 30%: it sends 0.3 of the tensor, the ring 1.0.
  const std::uint32_t two[] = {30, 10};
  EXPECT_TRUE(prefer_block_recursive_doubling(two, 2, 1, 100, 55));
  EXPECT_TRUE(prefer_block_recursive_doubling(two, 2, 1, 100, 30));
  EXPECT_FALSE(prefer_block_recursive_doubling(two, 2, 1, 100, 29));
  // 4 ranks, the densest at 50%: 0.5 + 0.75 against the ring's 1.5 (83%).
  const std::uint32_t four[] = {50, 0, 0, 0};
  EXPECT_FALSE(prefer_block_recursive_doubling(four, 4, 1, 100, 55));
  EXPECT_TRUE(prefer_block_recursive_doubling(four, 4, 1, 100, 84));
  // Counted over every stripe: 2 stripes of 50 blocks, 10% of the tensor.
  const std::uint32_t striped[] = {10, 0, 0, 0};
  EXPECT_TRUE(prefer_block_recursive_doubling(striped, 2, 2, 100, 10));
  EXPECT_FALSE(prefer_block_recursive_doubling(striped, 2, 2, 100, 9));
}

// The union density at which the whole-tensor rule turns dense: 2 ranks, block recursive
// doubling up to 45% of the ring's bytes, sends d: it switches at d = 46%, a union of
// 1 - 0.54^2 = 70.8%; at 4 ranks d + (1 - (1-d)^2) <= 0.45 * 1.5 holds to d = 25%, so it switches
// at 26%, a union of 1 - 0.74^4 = 70.0%.
TEST(HybridPlan, TheWholeTensorRuleTurnsDenseAtAUnionDensity) {
  EXPECT_EQ(whole_tensor_dense_union_percent(2, 45), 70u);
  EXPECT_EQ(whole_tensor_dense_union_percent(4, 45), 70u);
  EXPECT_EQ(whole_tensor_dense_union_percent(2, 100), 101u);  // never dense
  EXPECT_EQ(whole_tensor_dense_union_percent(1, 45), 101u);
  // The rule and the threshold agree: just below it block recursive doubling, at it not.
  const std::uint32_t two_at_45[] = {45, 0}, two_at_46[] = {46, 0};
  EXPECT_TRUE(prefer_block_recursive_doubling(two_at_45, 2, 1, 100, 45));
  EXPECT_FALSE(prefer_block_recursive_doubling(two_at_46, 2, 1, 100, 45));
}

// What a result calls for: per stripe against the stripes' threshold, or one bit for a tensor
// sent whole; the last stripe is shorter.
TEST(HybridPlan, AResultsDecisionsPerStripeOrForTheWholeTensor) {
  const std::uint32_t counts[] = {512, 100, 205, 4};  // stripes of 512 blocks, the last one 10
  std::vector<std::uint64_t> d;
  result_decisions(counts, 4, 3 * 512 + 10, 512, 40, false, &d);
  EXPECT_EQ(d, (std::vector<std::uint64_t>{0b1101}));  // 100%, 19%, 40%, 40%
  result_decisions(counts, 4, 3 * 512 + 10, 512, 53, true, &d);  // 821 of 1546 blocks: 53%
  EXPECT_EQ(d, (std::vector<std::uint64_t>{1}));
  result_decisions(counts, 4, 3 * 512 + 10, 512, 54, true, &d);
  EXPECT_EQ(d, (std::vector<std::uint64_t>{0}));
  result_decisions(counts, 0, 0, 512, 40, false, &d);
  EXPECT_TRUE(d.empty());
}

TEST(HybridPlan, TheButterflyBelowStripesWhenTheRanksAreAPowerOfTwoAboveTwo) {
  EXPECT_EQ(dense_algorithm_below_stripes(1), Algorithm::ring);
  EXPECT_EQ(dense_algorithm_below_stripes(2), Algorithm::ring);
  EXPECT_EQ(dense_algorithm_below_stripes(3), Algorithm::ring);
  EXPECT_EQ(dense_algorithm_below_stripes(4), Algorithm::butterfly);
  EXPECT_EQ(dense_algorithm_below_stripes(6), Algorithm::ring);
  EXPECT_EQ(dense_algorithm_below_stripes(8), Algorithm::butterfly);
}

}  // namespace
}  // namespace sparcoll::algo
