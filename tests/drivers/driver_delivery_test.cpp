// The delivery contract every driver must meet, over every driver built into the library, with
// loss injection as a parameter: every message arrives once and in order and every channel ends
// flushed; an armed wait_fd() wakes on a message (event mode); zero-copy sends read registered
// memory in place until user_memory_released(). A driver whose medium loses frames (its
// descriptor says recovers_loss) runs every case again with its loss hook dropping one data frame
// in N; the others run them lossless. Processes are threads (driver_cluster.hpp).
#include <gtest/gtest.h>
#include <poll.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "driver_cluster.hpp"
#include "driver_exchange.hpp"
#include "transport/driver_descriptor.hpp"

namespace sparcoll::test {
namespace {

using transport::Channel;
using transport::ChannelCounters;
using transport::ReceivedMessage;
using transport::SendResult;
using Clock = std::chrono::steady_clock;

constexpr auto kTestDeadline = std::chrono::seconds(30);

struct Delivery {
  std::string driver;
  std::uint32_t drop_every = 0;  // 0: no loss injected
};

// The drivers whose descriptor has `wanted` (all by default), each lossless, and each that
// recovers loss again with two loss rates.
std::vector<Delivery> deliveries(bool transport::DriverCapabilities::*wanted = nullptr) {
  std::vector<Delivery> out;
  for (const std::string& name : transport::available_drivers()) {
    const transport::DriverDescriptor* d = transport::find_driver(name);
    if (d == nullptr || (wanted != nullptr && !(d->capabilities.*wanted))) continue;
    out.push_back({name, 0});
    if (d->capabilities.recovers_loss) {
      out.push_back({name, 3});
      out.push_back({name, 7});
    }
  }
  return out;
}

// "tcp", or "dpdk_drop3": the lossless case keeps the bare driver name, so filters such as
// '*/rdma' (the Soft-RoCE VM's) select it.
std::string case_name(const ::testing::TestParamInfo<Delivery>& info) {
  if (info.param.drop_every == 0) return info.param.driver;
  return info.param.driver + "_drop" + std::to_string(info.param.drop_every);
}

class DriverDelivery : public ::testing::TestWithParam<Delivery> {
 protected:
  void SetUp() override {
    std::string reason;
    if (!transport::driver_usable(GetParam().driver, &reason))
      GTEST_SKIP() << GetParam().driver << " is not usable here: " << reason;
  }
  // A started cluster with the case's loss injected into every process.
  Status start(DriverCluster& cluster) {
    Status status = cluster.start_store();
    if (!status.ok()) return status;
    // The one loss hook today is dpdk's (SPARCOLL_DPDK_DROP_EVERY), and dpdk is the one driver
    // that recovers loss; a second such driver adds its hook here.
    for (std::uint32_t i = 0; i < cluster.config().processes; ++i) cluster.options(i).dpdk_drop_every = GetParam().drop_every;
    for (const Status& s : cluster.create())
      if (!s.ok()) return s;
    return Status::Ok();
  }
  ClusterConfig config(std::uint32_t processes, std::uint32_t channels, std::uint32_t max_message = 4096) const {
    ClusterConfig c;
    c.driver = GetParam().driver;
    c.processes = processes;
    c.channels = channels;
    c.max_message = max_message;
    return c;
  }
};
// The cases for drivers whose descriptor promises events, or zero-copy sends.
class DriverEvents : public DriverDelivery {};
class DriverZeroCopy : public DriverDelivery {};

// Counter `name` summed over every channel of every process.
std::uint64_t total(DriverCluster& cluster, const char* name) {
  std::uint64_t sum = 0;
  for (std::uint32_t i = 0; i < cluster.config().processes; ++i)
    for (std::uint32_t c = 0; c < cluster.config().channels; ++c) sum += cluster.driver(i).channel(c).counters().get(name);
  return sum;
}

TEST_P(DriverDelivery, EveryMessageArrivesOnceInOrderThenChannelsFlush) {
  DriverCluster cluster(config(3, 2));
  Status started = start(cluster);
  ASSERT_TRUE(started.ok()) << started.to_string();
  exchange_all(cluster, 2000);
  // A driver that recovers loss counts its resends and its loss hook's drops under these names
  // (ChannelCounters); the others have no such counters (0).
  EXPECT_EQ(total(cluster, "dropped_invalid"), 0u);
  const std::uint32_t every = GetParam().drop_every;
  const std::uint64_t dropped = total(cluster, "dropped_by_hook");
  const std::uint64_t retransmitted = total(cluster, "retransmitted");
  if (every == 0) {
    EXPECT_EQ(dropped, 0u);
    return;
  }
  EXPECT_GT(dropped, 0u);
  EXPECT_GE(retransmitted, dropped) << "every hook drop is recovered by a retransmission";
  // About one data transmission in N is dropped.
  const std::uint64_t data_tx = 2000 * 2 * 2 * 3 + retransmitted;
  EXPECT_NEAR(static_cast<double>(dropped), static_cast<double>(data_tx) / every,
              static_cast<double>(data_tx) / every * 0.05 + 12);
}

// Event mode's contract (driver.hpp): after arm(), a poll() that finds nothing, then a message
// from the peer, wait_fd() becomes readable and the next poll() hands the message out.
TEST_P(DriverEvents, AnArmedWaitFdWakesOnAMessage) {
  DriverCluster cluster(config(2, 1));
  Status started = start(cluster);
  ASSERT_TRUE(started.ok()) << started.to_string();
  Channel& tx = cluster.driver(0).channel(0);
  Channel& rx = cluster.driver(1).channel(0);
  const int fd = rx.wait_fd();
  ASSERT_GE(fd, 0);
  const std::uint32_t max = rx.max_message();
  for (std::uint64_t seq = 0; seq < 20; ++seq) {
    SCOPED_TRACE("message " + std::to_string(seq));
    ReceivedMessage got[4];
    rx.arm();
    ASSERT_EQ(rx.poll(got, 4), 0) << rx.error().to_string();
    const TestMessage message = test_message(seq, 0, 1, 0, max);
    SendResult r;
    while ((r = send_gathered(tx, 1, message)) == SendResult::no_resource) ASSERT_GE(tx.poll(got, 4), 0);
    ASSERT_EQ(r, SendResult::ok) << tx.error().to_string();
    // The sender keeps progressing (a packet driver sends from poll) while the receiver sleeps.
    std::atomic<bool> woke{false};
    std::thread sender([&] {
      ReceivedMessage none[4];
      const auto until = Clock::now() + kTestDeadline;
      while (!woke.load() && Clock::now() < until) {
        if (tx.poll(none, 4) < 0) return;
        std::this_thread::yield();
      }
    });
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, 10'000);
    woke = true;
    sender.join();
    ASSERT_EQ(ready, 1) << "wait_fd() stayed quiet for 10 s with a message on its way";
    // Readable means "poll may have something": the message may still be on its way (a frame
    // before its payload), so poll until it is out.
    int k = 0;
    const auto until = Clock::now() + kTestDeadline;
    while ((k = rx.poll(got, 4)) == 0 && Clock::now() < until) std::this_thread::yield();
    ASSERT_EQ(k, 1) << rx.error().to_string();
    EXPECT_EQ(got[0].peer, 0u);
    ASSERT_EQ(got[0].size, message.size);
    EXPECT_EQ(std::memcmp(got[0].data, message.bytes, message.size), 0);
  }
}

// Zero-copy sends (drivers whose descriptor says zero_copy): pieces inside a registered buffer
// are read in place after send() returns, until user_memory_released(); the peer receives
// exactly the bytes the buffer held; pieces outside the registration are copied.
TEST_P(DriverZeroCopy, SendsReadUserMemoryUntilReleased) {
  DriverCluster cluster(config(2, 1, 4096));
  Status started = start(cluster);
  ASSERT_TRUE(started.ok()) << started.to_string();
  constexpr std::size_t kSlot = 4096, kSlots = 64;
  std::vector<std::byte> buffer(kSlot * kSlots);
  transport::UserMemory user;
  ASSERT_TRUE(cluster.driver(0).register_memory(buffer.data(), buffer.size(), &user));
  ASSERT_EQ(user.base, buffer.data());
  ASSERT_EQ(user.len, buffer.size());
  Channel& tx = cluster.driver(0).channel(0);
  Channel& rx = cluster.driver(1).channel(0);
  EXPECT_TRUE(tx.user_memory_released());

  // Message m: a 16-byte header off the stack (copied), 1500 bytes of slot m % kSlots (in
  // place), its next 100 bytes (a driver may copy a piece this small), 1000 bytes further on in
  // the slot (in place, not adjacent), and 300 bytes outside the registration (copied).
  std::vector<std::byte> outside(300);
  for (std::size_t i = 0; i < outside.size(); ++i) outside[i] = static_cast<std::byte>(i * 7 + 1);
  auto iov_of = [&](std::uint64_t m, std::uint64_t* header, struct iovec* iov) {
    header[0] = m;
    header[1] = ~m;
    std::byte* slot = buffer.data() + (m % kSlots) * kSlot;
    iov[0] = {header, 16};
    iov[1] = {slot, 1500};
    iov[2] = {slot + 1500, 100};
    iov[3] = {slot + 2000, 1000};
    iov[4] = {outside.data(), outside.size()};
  };
  auto fill = [&](std::uint8_t round) {
    for (std::size_t i = 0; i < buffer.size(); ++i) buffer[i] = static_cast<std::byte>((i * 131 + round * 17) >> 3);
  };
  // What message m of `round` must contain (computed from the pattern, not the buffer).
  auto expected = [&](std::uint64_t m, std::uint8_t round) {
    std::vector<std::byte> want(16);
    const std::uint64_t h[2] = {m, ~m};
    std::memcpy(want.data(), h, 16);
    const std::size_t base = (m % kSlots) * kSlot;
    auto add = [&](std::size_t from, std::size_t n) {
      for (std::size_t i = from; i < from + n; ++i) want.push_back(static_cast<std::byte>((i * 131 + round * 17) >> 3));
    };
    add(base, 1500);
    add(base + 1500, 100);
    add(base + 2000, 1000);
    want.insert(want.end(), outside.begin(), outside.end());
    return want;
  };

  constexpr std::uint64_t kPerRound = 400;  // several passes over the slots within one round
  for (std::uint8_t round = 0; round < 2; ++round) {
    fill(round);
    std::uint64_t sent = 0, received = 0;
    bool seen_unreleased = false;  // the sends did read in place at some point
    const auto give_up = Clock::now() + kTestDeadline;
    while (received < kPerRound) {
      ASSERT_LT(Clock::now(), give_up) << "round " << int{round} << ": " << received << " of " << kPerRound << " arrived";
      while (sent < kPerRound) {
        std::uint64_t header[2];
        struct iovec iov[5];
        iov_of(sent, header, iov);
        const SendResult r = tx.send(1, iov, 5, user);
        ASSERT_NE(r, SendResult::error) << tx.error().to_string();
        if (r != SendResult::ok) break;
        ++sent;
        seen_unreleased = seen_unreleased || !tx.user_memory_released();
      }
      ReceivedMessage got[32];
      const int k = rx.poll(got, 32);
      ASSERT_GE(k, 0) << rx.error().to_string();
      for (int i = 0; i < k; ++i, ++received) {
        const std::vector<std::byte> want = expected(received, round);
        ASSERT_EQ(got[i].size, want.size());
        ASSERT_EQ(std::memcmp(got[i].data, want.data(), want.size()), 0)
            << "round " << int{round} << ": message " << received << " has the wrong bytes";
      }
      ASSERT_GE(tx.poll(got, 32), 0) << tx.error().to_string();
    }
    EXPECT_TRUE(seen_unreleased) << "no send read the registered buffer in place";
    // Released once every send that reads it has completed; the receiver keeps polling (acks).
    const auto until = Clock::now() + kTestDeadline;
    while (!tx.user_memory_released()) {
      ASSERT_LT(Clock::now(), until) << "user memory never released";
      ReceivedMessage got[8];
      ASSERT_EQ(rx.poll(got, 8), 0);
    }
    EXPECT_TRUE(tx.flushed());
  }
  const ChannelCounters c = tx.counters();
  if (GetParam().drop_every != 0) {
    EXPECT_GT(c.get("dropped_by_hook"), 0u);
    EXPECT_GE(c.get("retransmitted"), c.get("dropped_by_hook"));
  }

  // A message wholly outside the registration is copied: nothing to release.
  std::uint64_t header[2] = {0, 0};
  struct iovec small[2] = {{header, 16}, {outside.data(), 200}};
  SendResult r;
  while ((r = tx.send(1, small, 2, user)) == SendResult::no_resource) {
    ReceivedMessage got[8];
    ASSERT_GE(rx.poll(got, 8), 0);
  }
  ASSERT_EQ(r, SendResult::ok) << tx.error().to_string();
  EXPECT_TRUE(tx.user_memory_released());
}

INSTANTIATE_TEST_SUITE_P(Drivers, DriverDelivery, ::testing::ValuesIn(deliveries()), case_name);
INSTANTIATE_TEST_SUITE_P(Drivers, DriverEvents, ::testing::ValuesIn(deliveries(&transport::DriverCapabilities::events)),
                         case_name);
INSTANTIATE_TEST_SUITE_P(Drivers, DriverZeroCopy,
                         ::testing::ValuesIn(deliveries(&transport::DriverCapabilities::zero_copy)), case_name);
// A build with neither rdma nor dpdk has no zero-copy driver to test.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(DriverZeroCopy);

}  // namespace
}  // namespace sparcoll::test
