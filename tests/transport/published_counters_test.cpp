// ChannelCounters (a channel's named counters) and PublishedCounters (how the threads that drive
// channels hand them to transport_counters()): values by name, sums by name across channels,
// the fixed capacity, and a reader on another thread while the owner publishes.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "transport/published_counters.hpp"

namespace sparcoll::transport {
namespace {

ChannelCounters two(std::uint64_t sent, std::uint64_t resent) {
  ChannelCounters c;
  c.add("packets_sent", sent);
  c.add("retransmitted", resent);
  return c;
}

TEST(ChannelCounters, ValuesByNameAndZeroForAnUnknownName) {
  const ChannelCounters c = two(12, 3);
  EXPECT_EQ(c.count, 2u);
  EXPECT_EQ(c.get("packets_sent"), 12u);
  EXPECT_EQ(c.get("retransmitted"), 3u);
  EXPECT_EQ(c.get("duplicates"), 0u);
  EXPECT_EQ(ChannelCounters{}.get("packets_sent"), 0u);
}

TEST(ChannelCounters, BeyondTheCapacityCountersAreDropped) {
  ChannelCounters c;
  const char* names[] = {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"};
  for (std::uint64_t i = 0; i < 10; ++i) c.add(names[i], i);
  EXPECT_EQ(c.count, kMaxChannelCounters);
  EXPECT_EQ(c.get("h"), 7u);
  EXPECT_EQ(c.get("i"), 0u);
}

TEST(PublishedCounters, NothingPublishedAddsNothing) {
  PublishedCounters p;
  std::vector<NamedCounter> totals;
  p.add_to(&totals);
  EXPECT_TRUE(totals.empty());
}

TEST(PublishedCounters, ChannelsAreSummedByNameAndTheLastPublishWins) {
  PublishedCounters a, b;
  a.publish(two(1, 0));
  a.publish(two(10, 2));  // cumulative values: the newer replaces the older
  b.publish(two(5, 1));
  ChannelCounters more;
  more.add("packets_sent", 100);
  more.add("retransmitted", 0);
  more.add("duplicates", 4);
  PublishedCounters c;
  c.publish(more);
  std::vector<NamedCounter> totals;
  a.add_to(&totals);
  b.add_to(&totals);
  c.add_to(&totals);
  ASSERT_EQ(totals.size(), 3u);
  EXPECT_STREQ(totals[0].name, "packets_sent");
  EXPECT_EQ(totals[0].value, 115u);
  EXPECT_STREQ(totals[1].name, "retransmitted");
  EXPECT_EQ(totals[1].value, 3u);
  EXPECT_STREQ(totals[2].name, "duplicates");
  EXPECT_EQ(totals[2].value, 4u);
}

// The owner publishes growing values while another thread reads: every read sees a name for
// each counter it counts and values that never go backwards.
TEST(PublishedCounters, AReaderOnAnotherThreadSeesNamesAndGrowingValues) {
  PublishedCounters p;
  std::atomic<bool> done{false};
  std::thread owner([&] {
    for (std::uint64_t i = 1; i <= 20000; ++i) p.publish(two(i, i / 2));
    done = true;
  });
  std::uint64_t last = 0;
  while (!done.load()) {
    std::vector<NamedCounter> totals;
    p.add_to(&totals);
    for (const NamedCounter& t : totals) ASSERT_NE(t.name, nullptr);
    if (!totals.empty()) {
      EXPECT_GE(totals[0].value, last);
      last = totals[0].value;
    }
  }
  owner.join();
  std::vector<NamedCounter> totals;
  p.add_to(&totals);
  ASSERT_EQ(totals.size(), 2u);
  EXPECT_EQ(totals[0].value, 20000u);
}

}  // namespace
}  // namespace sparcoll::transport
