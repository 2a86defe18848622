// The hybrid's kept density tables: when a call may skip the exchange, and when it must not.
#include "algo/plan_reuse.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace sparcoll::algo {
namespace {

const PlanKey kShape{1u << 20, DataType::f32, ReduceOp::sum};
const std::vector<std::uint32_t> kTable = {10, 20, 30, 40};  // 2 ranks x 2 stripes

using Decisions = std::vector<std::uint64_t>;

// One hybrid call as the executor makes it: reuse the kept table if it may, else "exchange"
// `table`; its result calls for the plan `result` (bit s: stripe s dense). Returns whether the
// call exchanged.
bool call(PlanReuse& reuse, const PlanKey& key, const Decisions& result,
          const std::vector<std::uint32_t>& table = kTable) {
  const std::uint32_t* kept = reuse.reusable(key, table.size());
  if (kept != nullptr) {
    EXPECT_EQ(std::vector<std::uint32_t>(kept, kept + table.size()), std::vector<std::uint32_t>(table.begin(), table.end()));
    reuse.record(key, false, kept, table.size(), result);
    return false;
  }
  reuse.record(key, true, table.data(), table.size(), result);
  return true;
}

TEST(PlanReuse, OffMeansEveryCallExchanges) {
  PlanReuse reuse(0);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(call(reuse, kShape, {0b01}));
}

TEST(PlanReuse, TwoResultsCallingForTheSamePlanLetTheNextCallsSkipTheExchange) {
  PlanReuse reuse(32);
  EXPECT_TRUE(call(reuse, kShape, {0b10}));   // nothing kept yet
  EXPECT_TRUE(call(reuse, kShape, {0b10}));   // one result says nothing about the next
  EXPECT_FALSE(call(reuse, kShape, {0b10}));  // two results, one plan: reuse
  EXPECT_FALSE(call(reuse, kShape, {0b10}));
}

TEST(PlanReuse, AResultCallingForAnotherPlanMakesTheNextCallExchangeAndTrustStartsOver) {
  PlanReuse reuse(32);
  call(reuse, kShape, {0b00});
  call(reuse, kShape, {0b00});
  EXPECT_FALSE(call(reuse, kShape, {0b00}));
  EXPECT_FALSE(call(reuse, kShape, {0b01}));  // ran on the stale table: seen in its result
  EXPECT_TRUE(call(reuse, kShape, {0b01}));   // exchanges; the result matches the one before
  EXPECT_FALSE(call(reuse, kShape, {0b01}));
}

TEST(PlanReuse, TwoTensorsOfOneShapeOnEitherSideOfAThresholdInTurnAlwaysExchange) {
  PlanReuse reuse(32);
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(call(reuse, kShape, {i % 2 == 0 ? 0b00u : 0b11u}));
}

TEST(PlanReuse, AKeptTableServesAtMostMaxReusesCallsThenIsExchangedAgain) {
  PlanReuse reuse(3);
  call(reuse, kShape, {0b01});
  call(reuse, kShape, {0b01});
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(call(reuse, kShape, {0b01}));
  const std::vector<std::uint32_t> fresh = {11, 21, 31, 41};
  EXPECT_TRUE(call(reuse, kShape, {0b01}, fresh));
  // Still steady: the fresh table serves at once.
  const std::uint32_t* kept = reuse.reusable(kShape, fresh.size());
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(std::vector<std::uint32_t>(kept, kept + 4), fresh);
}

TEST(PlanReuse, AFailedCallMakesEveryShapeExchange) {
  PlanReuse reuse(32);
  const PlanKey other{999, DataType::bf16, ReduceOp::max};
  for (int i = 0; i < 2; ++i) {
    call(reuse, kShape, {0b11});
    call(reuse, other, {0b1});
  }
  reuse.forget_all();
  // Forgotten entirely: trust starts over, as on a fresh communicator.
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(call(reuse, kShape, {0b11}));
    EXPECT_TRUE(call(reuse, other, {0b1}));
  }
  EXPECT_FALSE(call(reuse, kShape, {0b11}));
}

TEST(PlanReuse, ShapesDifferingInCountDtypeOrOpAreKeptApart) {
  PlanReuse reuse(32);
  const PlanKey shapes[] = {kShape, {kShape.count + 1, DataType::f32, ReduceOp::sum},
                            {kShape.count, DataType::bf16, ReduceOp::sum}, {kShape.count, DataType::f32, ReduceOp::max}};
  for (int round = 0; round < 2; ++round)
    for (const PlanKey& k : shapes) EXPECT_TRUE(call(reuse, k, {0b10}));
  for (const PlanKey& k : shapes) EXPECT_FALSE(call(reuse, k, {0b10}));
}

TEST(PlanReuse, MoreShapesThanKeptEvictTheLeastRecentlyUsed) {
  PlanReuse reuse(32);
  const auto shape = [](std::size_t i) { return PlanKey{1000 + i, DataType::f32, ReduceOp::sum}; };
  for (int round = 0; round < 2; ++round)
    for (std::size_t i = 0; i < PlanReuse::kShapes; ++i) call(reuse, shape(i), {0b1});
  EXPECT_FALSE(call(reuse, shape(0), {0b1}));  // shape 0 is now the most recent
  EXPECT_TRUE(call(reuse, shape(PlanReuse::kShapes), {0b1}));  // evicts shape 1
  EXPECT_TRUE(call(reuse, shape(1), {0b1}));
  EXPECT_FALSE(call(reuse, shape(0), {0b1}));
}

TEST(PlanReuse, ATableOfAnotherSizeIsNotReused) {
  PlanReuse reuse(32);
  call(reuse, kShape, {0b1});
  call(reuse, kShape, {0b1});
  EXPECT_EQ(reuse.reusable(kShape, kTable.size() + 2), nullptr);
}

}  // namespace
}  // namespace sparcoll::algo
