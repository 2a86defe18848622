// What a hybrid allreduce's shape keeps for its later calls: when a call may skip the exchange,
// and when it must not.
#include "algo/plan_reuse.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace sparcoll::algo {
namespace {

const PlanKey kShape{1u << 20, DataType::f32, ReduceOp::sum};
const std::vector<std::uint32_t> kTable = {10, 20, 30, 40};  // 2 ranks x 2 stripes
constexpr RdBand kRd = RdBand::inside, kDense = RdBand::above;

// One hybrid call of a tensor that went whole, as the executor makes it: reuse the kept table if
// it may, else "exchange" `table`; its result calls for the dense algorithm or not (block
// recursive doubling), and has union_percent of its blocks non-zero. Returns whether the call
// exchanged.
bool call_whole(PlanReuse& reuse, const PlanKey& key, RdBand band, const std::vector<std::uint32_t>& table = kTable,
                std::uint32_t union_percent = 5) {
  const KeptPlan kept = reuse.reusable(key, table.size());
  EXPECT_EQ(kept.dense, nullptr);
  if (kept.kept()) {
    EXPECT_EQ(std::vector<std::uint32_t>(kept.table, kept.table + table.size()), table);
    reuse.record(key, false, kept.table, table.size(), band, union_percent);
    return false;
  }
  reuse.record(key, true, table.data(), table.size(), band, union_percent);
  return true;
}

using Plan = std::vector<std::uint64_t>;
constexpr std::uint64_t kBlocks = 1000;

// One call of a shape that went in stripes: planned from the kept plan if it may (*planned =
// that plan), else exchanged (*planned cleared); its result has union_blocks of kBlocks non-zero
// (above block recursive doubling's band) and calls for `next`. Returns whether the call
// exchanged.
bool call_stripes(PlanReuse& reuse, const PlanKey& key, const Plan& next, std::uint64_t union_blocks,
                  Plan* planned = nullptr) {
  const KeptPlan kept = reuse.reusable(key, kTable.size());
  if (planned != nullptr) *planned = kept.dense != nullptr ? *kept.dense : Plan{};
  const auto union_percent = static_cast<std::uint32_t>(union_blocks * 100 / kBlocks);
  reuse.record(key, !kept.kept(), kept.kept() ? kept.table : kTable.data(), kTable.size(), kDense, union_percent,
               &next);
  return !kept.kept();
}

TEST(PlanReuse, OffMeansEveryCallExchanges) {
  PlanReuse reuse(0);
  EXPECT_FALSE(reuse.enabled());
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(call_whole(reuse, kShape, kRd));
    EXPECT_TRUE(call_stripes(reuse, {7, DataType::f32, ReduceOp::sum}, {0b01}, 300));
  }
}

TEST(PlanReuse, TwoResultsCallingForTheSameAlgorithmLetAWholeTensorSkipTheExchange) {
  PlanReuse reuse(32);
  EXPECT_TRUE(call_whole(reuse, kShape, kDense));   // nothing kept yet
  EXPECT_TRUE(call_whole(reuse, kShape, kDense));   // one result says nothing about the next
  EXPECT_FALSE(call_whole(reuse, kShape, kDense));  // two results, one algorithm: reuse
  EXPECT_FALSE(call_whole(reuse, kShape, kDense));
}

// Above block recursive doubling's band (the dense algorithm, or the stripes of a dense tensor),
// and back.
TEST(PlanReuse, AWholeTensorsResultCallingForTheOtherAlgorithmMakesTheNextCallExchange) {
  PlanReuse reuse(32);
  call_whole(reuse, kShape, kRd);
  call_whole(reuse, kShape, kRd);
  EXPECT_FALSE(call_whole(reuse, kShape, kRd));
  EXPECT_FALSE(call_whole(reuse, kShape, kDense));  // ran on the stale table: seen in its result
  EXPECT_TRUE(call_whole(reuse, kShape, kDense));   // exchanges; the result matches the one before
  EXPECT_FALSE(call_whole(reuse, kShape, kDense));
  EXPECT_FALSE(call_whole(reuse, kShape, kRd));
  EXPECT_TRUE(call_whole(reuse, kShape, kRd));
  EXPECT_FALSE(call_whole(reuse, kShape, kRd));
}

// A whole tensor's call that went in stripes keeps the plan its result calls for with the
// table; the next call that plans from the table gets both, and a call that went whole forgets
// the plan.
TEST(PlanReuse, AWholeTensorInStripesKeepsThePlanItsResultCallsFor) {
  PlanReuse reuse(32);
  const Plan follow = {0b0110};
  for (int i = 0; i < 2; ++i) {
    const KeptPlan kept = reuse.reusable(kShape, kTable.size());
    EXPECT_FALSE(kept.kept());
    reuse.record(kShape, true, kTable.data(), kTable.size(), kDense, 40, &follow);
  }
  KeptPlan kept = reuse.reusable(kShape, kTable.size());
  ASSERT_NE(kept.table, nullptr);
  ASSERT_NE(kept.dense, nullptr);
  EXPECT_EQ(*kept.dense, follow);
  reuse.record(kShape, false, kept.table, kTable.size(), kDense, 40, nullptr);  // went whole
  kept = reuse.reusable(kShape, kTable.size());
  EXPECT_NE(kept.table, nullptr);
  EXPECT_EQ(kept.dense, nullptr);
}

TEST(PlanReuse, TwoWholeTensorsOfOneShapeOnEitherSideOfTheThresholdInTurnAlwaysExchange) {
  PlanReuse reuse(32);
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(call_whole(reuse, kShape, i % 2 == 0 ? kDense : kRd));
}

TEST(PlanReuse, AWholeTensorsKeptTableServesAtMostMaxReusesCallsThenIsExchangedAgain) {
  PlanReuse reuse(3);
  call_whole(reuse, kShape, kDense);
  call_whole(reuse, kShape, kDense);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(call_whole(reuse, kShape, kDense));
  const std::vector<std::uint32_t> fresh = {11, 21, 31, 41};
  EXPECT_TRUE(call_whole(reuse, kShape, kDense, fresh));
  // Still steady: the fresh table serves at once.
  const KeptPlan kept = reuse.reusable(kShape, fresh.size());
  ASSERT_NE(kept.table, nullptr);
  EXPECT_EQ(std::vector<std::uint32_t>(kept.table, kept.table + 4), fresh);
}

TEST(PlanReuse, AShapeInStripesFollowsItsLastResultOnceTwoResultsAreAlike) {
  PlanReuse reuse(32);
  Plan planned;
  EXPECT_TRUE(call_stripes(reuse, kShape, {0b11}, 340));   // nothing kept yet
  EXPECT_TRUE(call_stripes(reuse, kShape, {0b01}, 345));   // one result says nothing about the next
  EXPECT_FALSE(call_stripes(reuse, kShape, {0b00}, 341, &planned));
  EXPECT_EQ(planned, (Plan{0b01}));  // what the result before called for
  EXPECT_FALSE(call_stripes(reuse, kShape, {0b00}, 339, &planned));
  EXPECT_EQ(planned, (Plan{0b00}));
}

TEST(PlanReuse, AShapeInStripesWhoseUnionJumpsExchangesAndTrustStartsOver) {
  PlanReuse reuse(32);
  call_stripes(reuse, kShape, {0b00}, 100);
  call_stripes(reuse, kShape, {0b00}, 110);  // 10 points: steady
  EXPECT_FALSE(call_stripes(reuse, kShape, {0b11}, 900));  // ran on the stale plan: seen in its result
  EXPECT_TRUE(call_stripes(reuse, kShape, {0b11}, 905));   // exchanges
  Plan planned;
  EXPECT_FALSE(call_stripes(reuse, kShape, {0b11}, 910, &planned));
  EXPECT_EQ(planned, (Plan{0b11}));
}

TEST(PlanReuse, TwoTensorsOfOneShapeInStripesWithDifferentUnionsInTurnAlwaysExchange) {
  PlanReuse reuse(32);
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(call_stripes(reuse, kShape, {i % 2 == 0 ? 0b00u : 0b11u}, i % 2 == 0 ? 50 : 1000));
}

TEST(PlanReuse, AWholeTensorWhoseUnionMovesWithinItsBandKeepsItsTable) {
  // Decisions, not densities: a real gradient's union moves by 10-20 points from step to step.
  PlanReuse reuse(32);
  call_whole(reuse, kShape, kRd, kTable, 1);
  call_whole(reuse, kShape, kRd, kTable, 20);
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(call_whole(reuse, kShape, kRd, kTable, i % 2 == 0 ? 1 : 20));
}

TEST(PlanReuse, AShapeInStripesExchangesItsMasksAfterMaxReusesCallsAndKeepsFollowingItsResults) {
  PlanReuse reuse(3);
  call_stripes(reuse, kShape, {0b10}, 500);
  call_stripes(reuse, kShape, {0b10}, 500);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(call_stripes(reuse, kShape, {0b10}, 500));
  Plan planned;
  EXPECT_TRUE(call_stripes(reuse, kShape, {0b01}, 500, &planned));  // the masks again...
  EXPECT_EQ(planned, (Plan{0b10}));                                 // ...but the stripes follow the result
  EXPECT_FALSE(call_stripes(reuse, kShape, {0b01}, 500, &planned));
  EXPECT_EQ(planned, (Plan{0b01}));
}

TEST(PlanReuse, AFailedCallMakesEveryShapeExchange) {
  PlanReuse reuse(32);
  const PlanKey other{999, DataType::bf16, ReduceOp::max};
  for (int i = 0; i < 2; ++i) {
    call_whole(reuse, kShape, kDense);
    call_stripes(reuse, other, {0b1}, 700);
  }
  reuse.forget_all();
  EXPECT_EQ(reuse.calls(), 0u);
  // Forgotten entirely: trust starts over, as on a fresh communicator.
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(call_whole(reuse, kShape, kDense));
    EXPECT_TRUE(call_stripes(reuse, other, {0b1}, 700));
  }
  EXPECT_FALSE(call_whole(reuse, kShape, kDense));
  EXPECT_FALSE(call_stripes(reuse, other, {0b1}, 700));
}

TEST(PlanReuse, ShapesDifferingInCountDtypeOrOpAreKeptApart) {
  PlanReuse reuse(32);
  const PlanKey shapes[] = {kShape, {kShape.count + 1, DataType::f32, ReduceOp::sum},
                            {kShape.count, DataType::bf16, ReduceOp::sum}, {kShape.count, DataType::f32, ReduceOp::max}};
  for (int round = 0; round < 2; ++round)
    for (const PlanKey& k : shapes) EXPECT_TRUE(call_whole(reuse, k, kDense));
  for (const PlanKey& k : shapes) EXPECT_FALSE(call_whole(reuse, k, kDense));
}

TEST(PlanReuse, MoreShapesThanKeptEvictTheLeastRecentlyUsed) {
  PlanReuse reuse(32);
  const auto shape = [](std::size_t i) { return PlanKey{1000 + i, DataType::f32, ReduceOp::sum}; };
  for (int round = 0; round < 2; ++round)
    for (std::size_t i = 0; i < PlanReuse::kShapes; ++i) call_whole(reuse, shape(i), kDense);
  EXPECT_FALSE(call_whole(reuse, shape(0), kDense));  // shape 0 is now the most recent
  EXPECT_TRUE(call_whole(reuse, shape(PlanReuse::kShapes), kDense));  // evicts shape 1
  EXPECT_TRUE(call_whole(reuse, shape(1), kDense));
  EXPECT_FALSE(call_whole(reuse, shape(0), kDense));
}

TEST(PlanReuse, ATableOfAnotherSizeIsNotReused) {
  PlanReuse reuse(32);
  call_whole(reuse, kShape, kDense);
  call_whole(reuse, kShape, kDense);
  EXPECT_FALSE(reuse.reusable(kShape, kTable.size() + 2).kept());
}

TEST(PlanReuse, TheCallCountIsTheSameForEveryCallSequence) {
  // It places each call's result sample: every rank must count alike, kept or exchanged.
  PlanReuse reuse(32);
  for (int i = 0; i < 5; ++i) call_stripes(reuse, kShape, {0}, 10);
  for (int i = 0; i < 3; ++i) call_whole(reuse, {5, DataType::f32, ReduceOp::sum}, kRd);
  EXPECT_EQ(reuse.calls(), 8u);
}

}  // namespace
}  // namespace sparcoll::algo
