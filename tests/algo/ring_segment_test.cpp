// How the ring splits a tensor into segments (algo/p2p_algorithms.hpp, ring_segment_elems): from
// the call's integers only, so every rank goes round the same segments.
#include <gtest/gtest.h>

#include "algo/p2p_algorithms.hpp"

namespace sparcoll::algo {
namespace {

constexpr std::size_t kTwoMiB = std::size_t{2} << 20;

TEST(RingSegments, SegmentBytesOfAccumulatorsPerSegment) {
  EXPECT_EQ(ring_segment_elems(std::size_t{25} << 20, 4, 4, kTwoMiB), std::size_t{512} << 10);
  EXPECT_EQ(ring_segment_elems(std::size_t{25} << 20, 4, 8, kTwoMiB), std::size_t{256} << 10);  // wide accumulators
  EXPECT_EQ(ring_segment_elems(1283, 3, 4, 1024), 256u);  // 5 segments and a tail of 3
}

TEST(RingSegments, WholeTensorWhenOffOrAlone) {
  EXPECT_EQ(ring_segment_elems(1 << 20, 4, 4, 0), std::size_t{1} << 20);
  EXPECT_EQ(ring_segment_elems(1 << 20, 1, 4, kTwoMiB), std::size_t{1} << 20);
  EXPECT_EQ(ring_segment_elems(0, 4, 4, kTwoMiB), 1u);  // a count of 0 still goes round once
}

TEST(RingSegments, AtLeastAChunkPerRank) {
  EXPECT_EQ(ring_segment_elems(1000, 8, 4, 4), 8u);
  EXPECT_EQ(ring_segment_elems(1000, 5, 4, 1), 5u);
}

TEST(RingSegments, TheSegmentsTagsFitTheRingsTags) {
  for (std::uint32_t n : {2u, 3u, 4u, 8u, 1024u, 30000u}) {
    for (std::size_t count : {std::size_t{1} << 20, std::size_t{1} << 30, (std::size_t{1} << 34) + 7}) {
      const std::size_t seg = ring_segment_elems(count, n, 4, 4096);
      const std::size_t segments = (count + seg - 1) / seg;
      EXPECT_LT(segments * 2 * (n - 1), kRingTags) << n << " ranks, " << count << " elements";
    }
  }
  // Past the tags of two segments (and the count's): one ring over the whole tensor, as before segments.
  EXPECT_EQ(ring_segment_elems(1 << 20, 40000, 4, 4096), std::size_t{1} << 20);
}

}  // namespace
}  // namespace sparcoll::algo
