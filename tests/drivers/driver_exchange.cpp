#include "driver_exchange.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

namespace sparcoll::test {
namespace {

using transport::Channel;
using transport::ReceivedMessage;
using transport::SendResult;
using Clock = std::chrono::steady_clock;

constexpr auto kTestDeadline = std::chrono::seconds(30);

}  // namespace

// Every process sends `per_peer` test messages to every peer on every channel (gathered, sizes
// 1..max) and checks that each arrives exactly once and in order; then that every channel
// becomes flushed and nothing more arrives.
void exchange_all(DriverCluster& cluster, std::uint64_t per_peer) {
  const std::uint32_t processes = cluster.config().processes;
  const std::uint32_t channels = cluster.config().channels;
  const std::uint32_t max = cluster.driver(0).channel(0).max_message();
  std::atomic<std::uint32_t> finished{0};
  cluster.run([&](std::uint32_t self) {
    std::vector<std::vector<std::uint64_t>> next_send(channels, std::vector<std::uint64_t>(processes, 0));
    std::vector<std::vector<std::uint64_t>> next_recv(channels, std::vector<std::uint64_t>(processes, 0));
    const std::uint64_t expected = per_peer * (processes - 1) * channels;
    std::uint64_t received = 0;
    bool counted = false;
    const auto give_up = Clock::now() + kTestDeadline;
    while (finished.load() < processes) {
      if (Clock::now() > give_up) {
        ADD_FAILURE() << "process " << self << " received " << received << " of " << expected << " messages";
        return;
      }
      bool idle = true;
      for (std::uint32_t c = 0; c < channels; ++c) {
        Channel& channel = cluster.driver(self).channel(c);
        for (std::uint32_t peer = 0; peer < processes; ++peer) {
          if (peer == self) continue;
          while (next_send[c][peer] < per_peer) {
            const SendResult r = send_gathered(channel, peer, test_message(next_send[c][peer], self, peer, c, max));
            ASSERT_NE(r, SendResult::error) << channel.error().to_string();
            if (r == SendResult::no_resource) break;
            ++next_send[c][peer];
            idle = false;
          }
        }
        ReceivedMessage got[32];
        const int k = channel.poll(got, 32);
        ASSERT_GE(k, 0) << channel.error().to_string();
        for (int m = 0; m < k; ++m) {
          const std::uint32_t from = got[m].peer;
          ASSERT_LT(from, processes);
          ASSERT_EQ(reinterpret_cast<std::uintptr_t>(got[m].data) % 8, 0u);
          ASSERT_LT(next_recv[c][from], per_peer) << "a message too many from process " << from;
          const TestMessage want = test_message(next_recv[c][from], from, self, c, max);
          ASSERT_TRUE(got[m].size == want.size && std::memcmp(got[m].data, want.bytes, want.size) == 0)
              << "process " << self << " channel " << c << ": message " << next_recv[c][from] << " from process "
              << from << " is wrong, duplicated or out of order";
          ++next_recv[c][from];
          ++received;
          idle = false;
        }
      }
      if (!counted && received == expected) {
        counted = true;
        finished.fetch_add(1);
      }
      if (idle) std::this_thread::yield();
    }
    // Everything sent must end flushed (acknowledged, for a driver that resends), and nothing
    // more may arrive.
    const auto settle = Clock::now() + std::chrono::milliseconds(200);
    bool all_flushed = false;
    while (Clock::now() < give_up && (!all_flushed || Clock::now() < settle)) {
      all_flushed = true;
      for (std::uint32_t c = 0; c < channels; ++c) {
        Channel& channel = cluster.driver(self).channel(c);
        ReceivedMessage got[8];
        ASSERT_EQ(channel.poll(got, 8), 0) << "a message arrived twice";
        all_flushed = channel.flushed() && all_flushed;
      }
      std::this_thread::yield();
    }
    EXPECT_TRUE(all_flushed) << "process " << self << " still has messages in flight";
  });
}

}  // namespace sparcoll::test
