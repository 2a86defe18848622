// The hybrid's kept density tables: when a call may skip the exchange, and when it must not.
#include "algo/plan_reuse.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace sparcoll::algo {
namespace {

const PlanKey kShape{1u << 20, DataType::f32, ReduceOp::sum};
const std::vector<std::uint32_t> kTable = {10, 20, 30, 40};  // 2 ranks x 2 stripes

// One hybrid call as the executor makes it: reuse the kept table if it may, else "exchange"
// `table`; the result's densities are `result`. Returns whether the call exchanged.
bool call(PlanReuse& reuse, const PlanKey& key, const std::vector<std::uint8_t>& result,
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
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(call(reuse, kShape, {5, 5}));
}

TEST(PlanReuse, TwoMatchingResultsAfterAnExchangeLetTheNextCallsSkipIt) {
  PlanReuse reuse(32);
  EXPECT_TRUE(call(reuse, kShape, {5, 60}));   // nothing kept yet
  EXPECT_TRUE(call(reuse, kShape, {7, 58}));   // one result says nothing about the next
  EXPECT_FALSE(call(reuse, kShape, {6, 61}));  // two results within 10 points: reuse
  EXPECT_FALSE(call(reuse, kShape, {15, 70}));  // drift of 10 points from the result before
}

TEST(PlanReuse, AChangeInTheDataMakesTheNextCallExchangeAndTrustStartsOver) {
  PlanReuse reuse(32);
  call(reuse, kShape, {5, 5});
  call(reuse, kShape, {5, 5});
  EXPECT_FALSE(call(reuse, kShape, {5, 5}));
  EXPECT_FALSE(call(reuse, kShape, {5, 16}));  // ran on the stale table: seen in its result
  EXPECT_TRUE(call(reuse, kShape, {5, 16}));   // exchanges; the result matches the one before
  EXPECT_FALSE(call(reuse, kShape, {5, 16}));
}

TEST(PlanReuse, TwoTensorsOfOneShapeInTurnAlwaysExchange) {
  PlanReuse reuse(32);
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(call(reuse, kShape, i % 2 == 0 ? std::vector<std::uint8_t>{2, 3} : std::vector<std::uint8_t>{90, 95}));
}

TEST(PlanReuse, AKeptTableServesAtMostMaxReusesCallsThenIsExchangedAgain) {
  PlanReuse reuse(3);
  call(reuse, kShape, {40, 40});
  call(reuse, kShape, {40, 40});
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(call(reuse, kShape, {40, 40}));
  const std::vector<std::uint32_t> fresh = {11, 21, 31, 41};
  EXPECT_TRUE(call(reuse, kShape, {40, 40}, fresh));
  // Still steady: the fresh table serves at once.
  const std::uint32_t* kept = reuse.reusable(kShape, fresh.size());
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(std::vector<std::uint32_t>(kept, kept + 4), fresh);
}

TEST(PlanReuse, AFailedCallMakesEveryShapeExchange) {
  PlanReuse reuse(32);
  const PlanKey other{999, DataType::bf16, ReduceOp::max};
  for (int i = 0; i < 2; ++i) {
    call(reuse, kShape, {1, 1});
    call(reuse, other, {50});
  }
  reuse.forget_all();
  // Forgotten entirely: trust starts over, as on a fresh communicator.
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(call(reuse, kShape, {1, 1}));
    EXPECT_TRUE(call(reuse, other, {50}));
  }
  EXPECT_FALSE(call(reuse, kShape, {1, 1}));
}

TEST(PlanReuse, ShapesDifferingInCountDtypeOrOpAreKeptApart) {
  PlanReuse reuse(32);
  const PlanKey shapes[] = {kShape, {kShape.count + 1, DataType::f32, ReduceOp::sum},
                            {kShape.count, DataType::bf16, ReduceOp::sum}, {kShape.count, DataType::f32, ReduceOp::max}};
  for (int round = 0; round < 2; ++round)
    for (const PlanKey& k : shapes) EXPECT_TRUE(call(reuse, k, {10, 10}));
  for (const PlanKey& k : shapes) EXPECT_FALSE(call(reuse, k, {10, 10}));
}

TEST(PlanReuse, MoreShapesThanKeptEvictTheLeastRecentlyUsed) {
  PlanReuse reuse(32);
  const auto shape = [](std::size_t i) { return PlanKey{1000 + i, DataType::f32, ReduceOp::sum}; };
  for (int round = 0; round < 2; ++round)
    for (std::size_t i = 0; i < PlanReuse::kShapes; ++i) call(reuse, shape(i), {10, 10});
  EXPECT_FALSE(call(reuse, shape(0), {10, 10}));  // shape 0 is now the most recent
  EXPECT_TRUE(call(reuse, shape(PlanReuse::kShapes), {10, 10}));  // evicts shape 1
  EXPECT_TRUE(call(reuse, shape(1), {10, 10}));
  EXPECT_FALSE(call(reuse, shape(0), {10, 10}));
}

TEST(PlanReuse, ATableOfAnotherSizeIsNotReused) {
  PlanReuse reuse(32);
  call(reuse, kShape, {10, 10});
  call(reuse, kShape, {10, 10});
  EXPECT_EQ(reuse.reusable(kShape, kTable.size() + 2), nullptr);
}

TEST(PlanReuse, UnionPercentsRoundDownPerStripeWithAShortLastOne) {
  std::vector<std::uint8_t> percent;
  const std::uint32_t counts[] = {512, 0, 255, 9};  // stripes of 512 blocks, the last one 10
  union_percents(counts, 4, 3 * 512 + 10, 512, &percent);
  EXPECT_EQ(percent, (std::vector<std::uint8_t>{100, 0, 49, 90}));
  union_percents(counts, 0, 0, 512, &percent);
  EXPECT_TRUE(percent.empty());
}

}  // namespace
}  // namespace sparcoll::algo
