// The hybrid's plan: sampled stripe densities, and the rule that makes a stripe dense.
#include "algo/hybrid_plan.hpp"

#include <gtest/gtest.h>

#include "block/bitmap.hpp"

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

// The counts the stripes' plan takes: each stripe's sample mask (sample_stripe_masks) as an
// estimated count (mask_counts).
std::vector<std::uint32_t> sampled_counts(const std::vector<float>& t, std::uint32_t stripes) {
  std::vector<std::uint32_t> masks(stripes, 0), counts(stripes, 99);
  sample_stripe_masks(t.data(), t.size(), DataType::f32, kBlock, 512, masks.data());
  mask_counts(masks.data(), stripes, stripes, block::block_count(t.size(), kBlock), 512, counts.data());
  return counts;
}

TEST(HybridPlan, SampledCountsAreExactForShortStripesAndFullOrEmptyOnes) {
  // 3 stripes of 512 blocks and a last one of 20 (every block of it sampled); the tensor's last
  // block is short.
  const std::uint64_t nblocks = 3 * 512 + 20;
  const auto t = tensor(nblocks, 100, [](std::uint64_t b) { return b < 512 || (b >= 3 * 512 && b % 3 == 0); });
  const std::vector<std::uint32_t> counts = sampled_counts(t, 4);
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
  const std::vector<std::uint32_t> counts = sampled_counts(t, 64);
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

// A mask of the first k of a stripe's 32 samples, and of k samples from `from`.
std::uint32_t first_samples(int k) { return k >= 32 ? ~0u : (1u << k) - 1; }
std::uint32_t samples_from(int from, int k) { return first_samples(k) << from; }

TEST(HybridPlan, BlockRecursiveDoublingWhenItsEstimatedBytesAreAFractionOfTheRings) {
  // One stripe of 32 blocks (every block sampled). 2 ranks: it sends the denser rank's blocks,
  // the ring the whole tensor: 10 of 32 blocks is 31%.
  const std::uint32_t two[] = {first_samples(10), first_samples(3)};
  EXPECT_TRUE(prefer_block_recursive_doubling(two, 2, 1, 32, 512, 55));
  EXPECT_TRUE(prefer_block_recursive_doubling(two, 2, 1, 32, 512, 32));
  EXPECT_FALSE(prefer_block_recursive_doubling(two, 2, 1, 32, 512, 31));
  // 4 ranks at 8 blocks (25%) each. The same blocks on every rank: 8 + 8 against the ring's 48
  // (33%). Disjoint blocks: 8 + 16 (50%). What independent supports would give lies between.
  const std::uint32_t same[] = {first_samples(8), first_samples(8), first_samples(8), first_samples(8)};
  const std::uint32_t disjoint[] = {samples_from(0, 8), samples_from(8, 8), samples_from(16, 8), samples_from(24, 8)};
  EXPECT_TRUE(prefer_block_recursive_doubling(same, 4, 1, 32, 512, 34));
  EXPECT_FALSE(prefer_block_recursive_doubling(same, 4, 1, 32, 512, 33));
  EXPECT_TRUE(prefer_block_recursive_doubling(disjoint, 4, 1, 32, 512, 50));
  EXPECT_FALSE(prefer_block_recursive_doubling(disjoint, 4, 1, 32, 512, 49));
  // 3 ranks (not a power of two): the fold sends rank 0's 8 blocks to rank 1, then the step
  // the union of the folded pair (16 disjoint blocks): 24 of the ring's 2*2/3*32 = 42.7 (56%);
  // the same blocks everywhere: 8 + 8 (37.5%).
  EXPECT_TRUE(prefer_block_recursive_doubling(disjoint, 3, 1, 32, 512, 57));
  EXPECT_FALSE(prefer_block_recursive_doubling(disjoint, 3, 1, 32, 512, 56));
  EXPECT_TRUE(prefer_block_recursive_doubling(same, 3, 1, 32, 512, 38));
  EXPECT_FALSE(prefer_block_recursive_doubling(same, 3, 1, 32, 512, 37));
  // Scaled per stripe: 2 stripes, of 512 blocks (32 samples) and of 32 (all): rank 0 has a
  // quarter of the first stripe's samples (128 blocks) and none of the second; 128 of 544.
  const std::uint32_t striped[] = {first_samples(8), 0, /* rank 1 */ 0, 0};
  EXPECT_TRUE(prefer_block_recursive_doubling(striped, 2, 2, 544, 512, 24));
  EXPECT_FALSE(prefer_block_recursive_doubling(striped, 2, 2, 544, 512, 23));
  // And however few its bytes: no block at all, in stripes or not.
  const std::uint32_t none[] = {0, 0};
  EXPECT_TRUE(prefer_block_recursive_doubling(none, 2, 1, 32, 512, 55));
  EXPECT_TRUE(prefer_block_recursive_doubling(none, 2, 1, 32, 512, 55, /*against_stripes=*/true));
}

// Against the stripes (a tensor that goes in stripes when block recursive doubling is not
// picked) and a power of two of ranks, block recursive doubling must also send no more than the
// block-sparse engine is estimated to: (p-1)/p of the densest rank's blocks and of the union.
TEST(HybridPlan, BlockRecursiveDoublingAgainstTheStripesSendsNoMoreThanTheEngine) {
  // 8 ranks with the same 4 of 32 blocks: block recursive doubling sends 4 blocks at each of its
  // 3 steps, 12 (21% of the ring's 56), the engine 7/8 of (4 + 4), 7.
  std::vector<std::uint32_t> same(8, first_samples(4));
  EXPECT_TRUE(prefer_block_recursive_doubling(same.data(), 8, 1, 32, 512, 45));
  EXPECT_FALSE(prefer_block_recursive_doubling(same.data(), 8, 1, 32, 512, 45, /*against_stripes=*/true));
  // Disjoint, 2 blocks each: 2 + 4 + 8 = 14 against the engine's 7/8 of (2 + 16), 15.75.
  std::vector<std::uint32_t> disjoint;
  for (int r = 0; r < 8; ++r) disjoint.push_back(samples_from(2 * r, 2));
  EXPECT_TRUE(prefer_block_recursive_doubling(disjoint.data(), 8, 1, 32, 512, 45, true));
  // From the means: the sampled maxima are biased up, most in block recursive doubling's three.
  // So one dense rank among empty ones (8 blocks) is judged as 8 ranks of 1: 1 + 2 + 4 blocks in
  // the mean step against the engine's 7/8 of (1 + 8), and stays with block recursive doubling,
  // as without this rule (the ring's 45% takes 24 of 56 blocks).
  std::vector<std::uint32_t> lone(8, 0);
  lone[0] = first_samples(8);
  EXPECT_TRUE(prefer_block_recursive_doubling(lone.data(), 8, 1, 32, 512, 45, true));
  // Not with 6 ranks (measured: block recursive doubling's fold and steps beat the engine there
  // where the bytes favour the engine), and at 2 ranks it always sends fewer.
  EXPECT_TRUE(prefer_block_recursive_doubling(same.data(), 6, 1, 32, 512, 45, true));
  const std::uint32_t two[] = {first_samples(10), first_samples(10)};
  EXPECT_TRUE(prefer_block_recursive_doubling(two, 2, 1, 32, 512, 45, true));
  // The whole tensor's result band follows: at 8 ranks, as dense as each other with independent
  // supports, block recursive doubling's 3 steps send more than the engine from 6% (a union of
  // 1 - 0.94^8 = 39%), where the ring's 45% alone allowed it to 13% (70%). At 4 and 2 ranks and at
  // 6 the rule is the ring's alone.
  EXPECT_EQ(whole_tensor_dense_union_percent(8, 45, true), 39u);
  EXPECT_EQ(whole_tensor_dense_union_percent(8, 45), 70u);
  EXPECT_EQ(whole_tensor_dense_union_percent(4, 45, true), whole_tensor_dense_union_percent(4, 45));
  EXPECT_EQ(whole_tensor_dense_union_percent(2, 45, true), whole_tensor_dense_union_percent(2, 45));
  EXPECT_EQ(whole_tensor_dense_union_percent(6, 45, true), whole_tensor_dense_union_percent(6, 45));
}

TEST(HybridPlan, BlockRecursiveDoublingsShareOfTheRingShrinksWithTheTensor) {
  constexpr std::uint64_t KiB = 1024, MiB = 1024 * KiB;
  // Over shm 20% up to 2 MiB, 5 points less per doubling, at least 10.
  EXPECT_EQ(rd_max_percent(true, 4 * KiB), 20u);
  EXPECT_EQ(rd_max_percent(true, 1 * MiB), 20u);
  EXPECT_EQ(rd_max_percent(true, 2 * MiB), 20u);
  EXPECT_EQ(rd_max_percent(true, 3 * MiB), 18u);
  EXPECT_EQ(rd_max_percent(true, 4 * MiB), 15u);
  EXPECT_EQ(rd_max_percent(true, 8 * MiB), 10u);
  EXPECT_EQ(rd_max_percent(true, 64 * MiB), 10u);
  // Over a wire: 80% up to 256 KiB, 12 points less per doubling, linear in between, at least 45.
  EXPECT_EQ(rd_max_percent(false, 0), 80u);
  EXPECT_EQ(rd_max_percent(false, 4 * KiB), 80u);
  EXPECT_EQ(rd_max_percent(false, 256 * KiB), 80u);
  EXPECT_EQ(rd_max_percent(false, 384 * KiB), 74u);
  EXPECT_EQ(rd_max_percent(false, 512 * KiB), 68u);
  EXPECT_EQ(rd_max_percent(false, 880 * KiB), 60u);  // the LSTM trace's 0.86 MiB
  EXPECT_EQ(rd_max_percent(false, 1 * MiB), 56u);
  EXPECT_EQ(rd_max_percent(false, 1920 * KiB), 46u);
  EXPECT_EQ(rd_max_percent(false, 2 * MiB), 45u);
  EXPECT_EQ(rd_max_percent(false, 3 * MiB), 45u);
  EXPECT_EQ(rd_max_percent(false, 4 * MiB), 45u);
  EXPECT_EQ(rd_max_percent(false, 16 * MiB), 45u);
  // Above 16 MiB, kWireLargeTensorPercent.
  EXPECT_EQ(rd_max_percent(false, 16 * MiB + 1), 8u);
  EXPECT_EQ(rd_max_percent(false, 100 * MiB), 8u);
  EXPECT_EQ(rd_max_percent(false, std::uint64_t{1} << 62), 8u);
  // Never larger for a larger tensor.
  for (const bool shm : {false, true}) {
    std::uint32_t last = 100;
    for (std::uint64_t bytes = 1; bytes < 64 * MiB; bytes = bytes * 17 / 16 + 1) {
      const std::uint32_t p = rd_max_percent(shm, bytes);
      EXPECT_LE(p, last) << bytes;
      last = p;
    }
  }
}

TEST(HybridPlan, AStripesSampleMaskNamesItsNonZeroSamplesAndScalesToItsCount) {
  // 64 blocks of 4 elements, one stripe: the samples are blocks 1, 3, 5, ... (the middle of each
  // pair); blocks 3 and 10 non-zero: sample 1 only (block 10 is not sampled).
  std::vector<float> t(64 * 4, 0.0f);
  t[3 * 4 + 2] = 1.0f;
  t[10 * 4] = -2.0f;
  EXPECT_EQ(sample_stripe_mask(t.data(), t.size(), DataType::f32, 4, 0, 64), 0b10u);
  EXPECT_EQ(sample_stripe_count(t.data(), t.size(), DataType::f32, 4, 0, 64), 2u);  // 1 of 32 samples x 64 blocks
  EXPECT_EQ(mask_blocks(first_samples(32), 64), 64u);
  EXPECT_EQ(mask_blocks(0b1u, 5), 1u);  // a stripe of 5 blocks: every block sampled
  std::uint32_t masks[2] = {};
  sample_stripe_masks(t.data(), t.size(), DataType::f32, 4, 32, masks);  // 2 stripes of 32 blocks: all sampled
  EXPECT_EQ(masks[0], (1u << 3) | (1u << 10));
  EXPECT_EQ(masks[1], 0u);
}

TEST(HybridPlan, ATableOfMasksBecomesEachStripesEstimatedCount) {
  // 2 ranks x 2 stripes of 64 blocks, 100 blocks in all: the second stripe has 36.
  const std::uint32_t masks[] = {first_samples(32), first_samples(16), 0u, first_samples(32)};
  std::uint32_t counts[4] = {};
  mask_counts(masks, 4, 2, 100, 64, counts);
  EXPECT_EQ(counts[0], 64u);
  EXPECT_EQ(counts[1], mask_blocks(first_samples(16), 36));
  EXPECT_EQ(counts[2], 0u);
  EXPECT_EQ(counts[3], 36u);
}

// Over shm auto's threshold is the union of ranks 12% dense each: 1 - 0.88^2 = 22.6%, 1 - 0.88^4
// = 40.0%, 1 - 0.88^8 = 64.0%, rounded; it only grows with the ranks and stays below 100.
TEST(HybridPlan, TheShmThresholdIsTheUnionOfRanksTwelvePercentDense) {
  EXPECT_EQ(shm_dense_union_percent(1), 12u);
  EXPECT_EQ(shm_dense_union_percent(2), 23u);
  EXPECT_EQ(shm_dense_union_percent(3), 32u);
  EXPECT_EQ(shm_dense_union_percent(4), 40u);
  EXPECT_EQ(shm_dense_union_percent(8), 64u);
  EXPECT_EQ(shm_dense_union_percent(16), 87u);
  std::uint32_t last = 0;
  for (std::uint32_t ranks = 1; ranks <= 4096; ranks *= 2) {
    EXPECT_GE(shm_dense_union_percent(ranks), last) << ranks;
    EXPECT_LE(shm_dense_union_percent(ranks), 100u) << ranks;
    last = shm_dense_union_percent(ranks);
  }
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
  // The rule and the threshold agree for 2 ranks: 14 of 32 blocks (43.75%) block recursive
  // doubling, 15 (46.9%) not.
  const std::uint32_t two_at_44[] = {first_samples(14), 0}, two_at_47[] = {first_samples(15), 0};
  EXPECT_TRUE(prefer_block_recursive_doubling(two_at_44, 2, 1, 32, 512, 45));
  EXPECT_FALSE(prefer_block_recursive_doubling(two_at_47, 2, 1, 32, 512, 45));
}

// What a whole tensor's result calls for: its union density against the threshold, over every
// stripe (the last one shorter).
TEST(HybridPlan, AWholeTensorsResultCallsForBlockRecursiveDoublingBelowItsThreshold) {
  const std::uint32_t counts[] = {512, 100, 205, 4};  // stripes of 512 blocks, the last one 10
  EXPECT_EQ(result_rd_band(counts, 4, 3 * 512 + 10, 53), RdBand::above);  // 821 of 1546 blocks: 53%
  EXPECT_EQ(result_rd_band(counts, 4, 3 * 512 + 10, 54), RdBand::inside);
  const std::uint32_t none[] = {0, 0, 0, 0};
  EXPECT_EQ(result_rd_band(none, 4, 3 * 512 + 10, 54), RdBand::inside);  // however sparse
  EXPECT_EQ(result_rd_band(counts, 0, 0, 0), RdBand::inside);
}

// The plan a result calls for: a block-sparse stripe's exact count against the threshold, a
// dense stripe's sampled one against the threshold less the hysteresis.
TEST(HybridPlan, APlanFollowsItsResultWithHysteresisOnTheSampledDenseStripes) {
  // 5 stripes of 100 blocks, the last one 50; threshold 40%.
  const std::uint32_t counts[] = {40, 39, 35, 34, 20};
  const std::vector<std::uint64_t> all_sparse = {0}, all_dense = {0b11111};
  std::vector<std::uint64_t> next;
  follow_result(counts, all_sparse, 5, 450, 100, 40, &next);
  EXPECT_EQ(next, (std::vector<std::uint64_t>{0b10001}));  // 40% and 20 of 50 blocks: dense
  follow_result(counts, all_dense, 5, 450, 100, 40, &next);
  EXPECT_EQ(next, (std::vector<std::uint64_t>{0b10111}));  // dense down to 35%
  follow_result(counts, {0b01010}, 5, 450, 100, 40, &next);
  EXPECT_EQ(next, (std::vector<std::uint64_t>{0b10011}));  // stripe 1 stays dense, stripe 3 goes sparse
  follow_result(counts, all_dense, 5, 450, 100, 0, &next);
  EXPECT_EQ(next, all_dense);  // 0: every stripe dense
  follow_result(counts, all_sparse, 5, 450, 100, 101, &next);
  EXPECT_EQ(next, all_sparse);  // above 100: none
  // The same rule, alone: what makes the executor count a sampled dense stripe exactly first.
  EXPECT_FALSE(sample_leaves_dense(35, 100, 40));
  EXPECT_TRUE(sample_leaves_dense(34, 100, 40));
  EXPECT_TRUE(sample_leaves_dense(19, 32, 65));  // 59% of a 32-block sample against 60
  EXPECT_FALSE(sample_leaves_dense(20, 32, 65));
  EXPECT_FALSE(sample_leaves_dense(0, 32, 3));   // a threshold at or below the hysteresis: never
}

// After the call that exchanged the samples the dense stripes' counts are exact: they meet the
// threshold itself, without the hysteresis a sampled count needs.
TEST(HybridPlan, ExactCountsOfDenseStripesMeetTheThresholdItself) {
  const std::uint32_t counts[] = {40, 39, 35, 34, 20};
  const std::vector<std::uint64_t> all_sparse = {0}, all_dense = {0b11111};
  std::vector<std::uint64_t> next;
  follow_result(counts, all_dense, 5, 450, 100, 40, &next, /*dense_exact=*/true);
  EXPECT_EQ(next, (std::vector<std::uint64_t>{0b10001}));  // 39% and 35% go sparse at once
  follow_result(counts, all_sparse, 5, 450, 100, 40, &next, /*dense_exact=*/true);
  EXPECT_EQ(next, (std::vector<std::uint64_t>{0b10001}));  // block-sparse stripes as before
}

// The exact count reads every block: a non-zero element at a block's end counts, and the last,
// shorter block too; blocks outside [first, first + blocks) do not.
TEST(HybridPlan, AnExactCountSeesEveryNonZeroBlockOfTheStripe) {
  const std::vector<float> t = tensor(100, 7, [](std::uint64_t b) { return b % 3 == 0 || b == 98; });
  EXPECT_EQ(count_stripe_blocks(t.data(), t.size(), DataType::f32, kBlock, 0, 100), 35u);  // 0, 3, ..., 99 and 98
  EXPECT_EQ(count_stripe_blocks(t.data(), t.size(), DataType::f32, kBlock, 1, 2), 0u);
  EXPECT_EQ(count_stripe_blocks(t.data(), t.size(), DataType::f32, kBlock, 96, 4), 3u);  // 96, 98 and 99 (the short one)
  EXPECT_EQ(count_stripe_blocks(t.data(), t.size(), DataType::f32, kBlock, 0, 0), 0u);
}

// A sample at another phase sees other blocks: a stripe whose even blocks are non-zero looks
// full at a phase that takes the first block of each pair and empty at one that takes the second.
TEST(HybridPlan, TheSamplesPhaseSaysWhichBlockOfEachPartIsRead) {
  const auto t = tensor(64, 0, [](std::uint64_t b) { return b % 2 == 0; });
  EXPECT_EQ(sample_stripe_count(t.data(), t.size(), DataType::f32, kBlock, 0, 64, 0), 64u);
  EXPECT_EQ(sample_stripe_count(t.data(), t.size(), DataType::f32, kBlock, 0, 64, 40), 0u);
  EXPECT_EQ(sample_stripe_count(t.data(), t.size(), DataType::f32, kBlock, 0, 64, 64 + 10), 64u);  // modulo the stripe
  EXPECT_EQ(sample_stripe_count(t.data(), t.size(), DataType::f32, kBlock, 0, 64), 0u);  // the middle: blocks 1, 3, ...
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
