// The dpdk channel's reliable-delivery decisions (drivers/dpdk/dpdk_reliability.hpp), without
// DPDK: the round-trip estimate and the timeout, the SACK bitmap both ways, and when a frame is
// presumed lost. Built into the unit suite whether or not DPDK is installed.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "../../drivers/dpdk/dpdk_reliability.hpp"

namespace sparcoll::transport::dpdk {
namespace {

TEST(DpdkReliability, TheFirstSampleSetsTheEstimateAndLaterOnesMoveItByAnEighth) {
  RttEstimate e;
  e.sample(800);
  EXPECT_EQ(e.srtt, 800u);
  EXPECT_EQ(e.rttvar, 400u);
  e.sample(1600);  // diff 800: rttvar = (3*400 + 800)/4, srtt = (7*800 + 1600)/8
  EXPECT_EQ(e.rttvar, 500u);
  EXPECT_EQ(e.srtt, 900u);
  for (int i = 0; i < 200; ++i) e.sample(1000);
  EXPECT_NEAR(static_cast<double>(e.srtt), 1000.0, 8.0);
  EXPECT_LT(e.rttvar, 8u);
}

TEST(DpdkReliability, TheTimeoutIsClampedAndDoubledPerBackoffUpToTheMaximum) {
  RttEstimate e;
  EXPECT_EQ(e.timeout(5000, 2000, 200000, 0), 5000u) << "before any sample: the initial timeout";
  EXPECT_EQ(e.timeout(500, 2000, 200000, 0), 2000u) << "never below the minimum";
  e.sample(1000);                                    // srtt 1000, rttvar 500: 3000
  EXPECT_EQ(e.timeout(5000, 2000, 200000, 0), 3000u);
  EXPECT_EQ(e.timeout(5000, 2000, 200000, 3), 24000u);
  EXPECT_EQ(e.timeout(5000, 2000, 200000, 8), 200000u) << "never above the maximum";
  EXPECT_EQ(e.timeout(5000, 2000, 200000, 70), 200000u) << "a shift beyond the word is the maximum too";
  RttEstimate slow;
  slow.sample(1'000'000);
  EXPECT_EQ(slow.timeout(5000, 2000, 200000, 0), 200000u);
}

TEST(DpdkReliability, JitterAddsAtMostAnEighthAndVaries) {
  std::uint64_t state = 12345;
  std::set<std::uint64_t> seen;
  for (int i = 0; i < 1000; ++i) {
    const std::uint64_t w = jittered(8000, &state);
    EXPECT_GE(w, 8000u);
    EXPECT_LE(w, 9000u);
    seen.insert(w);
  }
  EXPECT_GT(seen.size(), 100u);
  EXPECT_EQ(jittered(0, &state), 0u);
}

TEST(DpdkReliability, SackBitsMarkTheStoredSeqsAboveTheFirstMissingOneWithinTheLimit) {
  const std::set<std::uint64_t> stored = {12, 13, 20, 74, 75};
  auto has = [&](std::uint64_t seq) { return stored.count(seq) != 0; };
  // arrived = 10: seq 10 is missing, bit i is seq 11 + i.
  const std::uint64_t bits = sack_bits(10, 1000, has);
  EXPECT_EQ(bits, (std::uint64_t{1} << 1) | (std::uint64_t{1} << 2) | (std::uint64_t{1} << 9) |
                      (std::uint64_t{1} << 63));  // 12, 13, 20, 74; 75 is beyond the 64 bits
  EXPECT_EQ(sack_bits(10, 14, has), (std::uint64_t{1} << 1) | (std::uint64_t{1} << 2)) << "nothing at or above the limit";
  EXPECT_EQ(sack_bits(10, 11, has), 0u);
}

TEST(DpdkReliability, TheSenderReadsBackWhatTheReceiverMarked) {
  const std::set<std::uint64_t> stored = {101, 102, 140, 164};
  const std::uint64_t bits = sack_bits(100, 1 << 20, [&](std::uint64_t seq) { return stored.count(seq) != 0; });
  std::vector<std::uint64_t> got;
  const std::uint64_t highest = for_each_sacked(100, bits, [&](std::uint64_t seq) { got.push_back(seq); });
  EXPECT_EQ(got, (std::vector<std::uint64_t>{101, 102, 140, 164}));
  EXPECT_EQ(highest, 164u);
  EXPECT_EQ(for_each_sacked(7, 0, [](std::uint64_t) { ADD_FAILURE(); }), 7u) << "no bit: the ack itself";
}

TEST(DpdkReliability, AFrameIsPresumedLostByCountOrWhenOvertaken) {
  // Sent once, seq 5: lost once seq 8 (three later) is acknowledged, not at 7.
  EXPECT_FALSE(presumed_lost(5, 1, 40, 7, 0));
  EXPECT_TRUE(presumed_lost(5, 1, 40, 8, 0));
  // Resent frames are not judged by count (their acknowledgement may be on its way)...
  EXPECT_FALSE(presumed_lost(5, 2, 40, 100, 0));
  // ... but by order: a transmission after it (number 41 > 40) arrived.
  EXPECT_TRUE(presumed_lost(5, 2, 40, 5, 41));
  EXPECT_FALSE(presumed_lost(5, 2, 40, 5, 40)) << "its own transmission arriving proves nothing lost";
}

}  // namespace
}  // namespace sparcoll::transport::dpdk
