// The semantics every driver must meet, run over every driver built into the library
// (available_drivers()), with N processes as threads: delivery, order, gathered sends,
// back-pressure and the message size limit. Failure handling is driver_failure_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "driver_cluster.hpp"
#include "driver_exchange.hpp"
#include "common/config.hpp"
#include "transport/driver_descriptor.hpp"

namespace sparcoll::test {
namespace {

using transport::Channel;
using transport::ReceivedMessage;
using transport::SendResult;
using Clock = std::chrono::steady_clock;

constexpr auto kTestDeadline = std::chrono::seconds(20);

class DriverConformance : public ::testing::TestWithParam<std::string> {
 protected:
  // A driver that is built but cannot run here (rdma without a device) is skipped, saying why.
  void SetUp() override {
    std::string reason;
    if (!transport::driver_usable(GetParam(), &reason)) GTEST_SKIP() << GetParam() << " is not usable here: " << reason;
  }
  ClusterConfig config(std::uint32_t processes, std::uint32_t channels, std::uint32_t max_message = 4096) {
    ClusterConfig c;
    c.driver = GetParam();
    c.processes = processes;
    c.channels = channels;
    c.max_message = max_message;
    return c;
  }
};

TEST_P(DriverConformance, ReportsItsNameAndLimits) {
  DriverCluster cluster(config(2, 2));
  ASSERT_TRUE(cluster.start().ok());
  EXPECT_EQ(cluster.driver(0).name(), GetParam());
  EXPECT_EQ(cluster.driver(0).channel(1).max_message(), 4096u);
  EXPECT_TRUE(cluster.driver(0).channel(0).flushed());
}

// Every process pings every peer on every channel; each answers every ping with a pong that
// echoes it; everyone counts its pongs.
struct PingPong {
  std::uint32_t kind;  // 1 ping, 2 pong
  std::uint32_t from;
  std::uint32_t to;
  std::uint32_t channel;
};

SendResult send_ping_pong(Channel& channel, const PingPong& message) {
  struct iovec iov = {const_cast<PingPong*>(&message), sizeof message};
  return channel.send(message.to, &iov, 1);
}

TEST_P(DriverConformance, PingPongAllToAll) {
  for (std::uint32_t processes = 2; processes <= 4; ++processes) {
    SCOPED_TRACE("processes " + std::to_string(processes));
    DriverCluster cluster(config(processes, 2));
    Status started = cluster.start();
    ASSERT_TRUE(started.ok()) << started.to_string();
    std::atomic<std::uint32_t> done{0};
    cluster.run([&](std::uint32_t self) {
      const std::uint32_t expected = (processes - 1) * 2;
      std::uint32_t pongs = 0;
      for (std::uint32_t c = 0; c < 2; ++c) {
        for (std::uint32_t peer = 0; peer < processes; ++peer) {
          if (peer == self) continue;
          EXPECT_EQ(send_ping_pong(cluster.driver(self).channel(c), PingPong{1, self, peer, c}), SendResult::ok);
        }
      }
      const auto give_up = Clock::now() + kTestDeadline;
      // Keep polling until everyone has its pongs, so no answer is left unsent.
      while (done.load() < processes && Clock::now() < give_up) {
        bool idle = true;
        for (std::uint32_t c = 0; c < 2; ++c) {
          Channel& channel = cluster.driver(self).channel(c);
          ReceivedMessage got[8];
          const int k = channel.poll(got, 8);
          ASSERT_GE(k, 0) << channel.error().to_string();
          for (int m = 0; m < k; ++m) {
            idle = false;
            ASSERT_EQ(got[m].size, sizeof(PingPong));
            PingPong message;
            std::memcpy(&message, got[m].data, sizeof message);
            EXPECT_EQ(message.from, got[m].peer);
            EXPECT_EQ(message.to, self);
            EXPECT_EQ(message.channel, c) << "a message crossed channels";
            if (message.kind == 2) {
              if (++pongs == expected) done.fetch_add(1);
              continue;
            }
            SendResult sent;
            while ((sent = send_ping_pong(channel, PingPong{2, self, got[m].peer, c})) == SendResult::no_resource)
              std::this_thread::yield();
            EXPECT_EQ(sent, SendResult::ok);
          }
        }
        if (idle) std::this_thread::yield();
      }
      EXPECT_EQ(pongs, expected) << "rank " << self;
    });
  }
}

// 10k messages per (sender, receiver, channel) of sizes 1..max_message, sent as gathered
// iovecs as fast as back-pressure allows, must arrive complete and in order.
TEST_P(DriverConformance, ManyMessagesArriveInOrder) {
  constexpr std::uint32_t kProcesses = 3;
  constexpr std::uint32_t kChannels = 2;
  // Soft-RoCE runs under CPU emulation in CI (scripts/rxe-vm), about 5x slower than tcp on
  // loopback there: it gets a smaller count, still many times its ring and credit windows.
  const std::uint64_t kPerPeer = GetParam() == "rdma" ? 2000 : 10000;
  DriverCluster cluster(config(kProcesses, kChannels));
  Status started = cluster.start();
  ASSERT_TRUE(started.ok()) << started.to_string();
  exchange_all(cluster, kPerPeer);
}

// The sender fills the path to a receiver that does not poll until send() says no_resource
// (and keeps saying it), then the receiver drains: nothing lost, duplicated or reordered.
TEST_P(DriverConformance, BackPressureLosesNothing) {
  constexpr std::uint32_t kSize = 1024;
  DriverCluster cluster(config(2, 2));
  Status started = cluster.start();
  ASSERT_TRUE(started.ok()) << started.to_string();
  std::atomic<bool> full{false}, flushed{false};
  std::atomic<std::uint64_t> total{0};
  cluster.run([&](std::uint32_t self) {
    Channel& channel = cluster.driver(self).channel(1);
    std::byte payload[kSize] = {};
    const auto give_up = Clock::now() + kTestDeadline;
    if (self == 0) {
      std::uint64_t seq = 0;
      int refused_in_a_row = 0;
      // Phase 1: fill. Polling our own channel lets tcp move its queue into the kernel.
      while (refused_in_a_row < 50 && Clock::now() < give_up) {
        std::memcpy(payload, &seq, sizeof seq);
        struct iovec iov = {payload, kSize};
        const SendResult r = channel.send(1, &iov, 1);
        ASSERT_NE(r, SendResult::error) << channel.error().to_string();
        if (r == SendResult::ok) {
          ++seq;
          refused_in_a_row = 0;
          continue;
        }
        ++refused_in_a_row;
        ReceivedMessage got[4];
        ASSERT_EQ(channel.poll(got, 4), 0);
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      ASSERT_EQ(refused_in_a_row, 50) << "send() never reported no_resource";
      const std::uint64_t filled = seq;
      EXPECT_GT(filled, 0u);
      full.store(true);
      // Phase 2: as many again while the receiver drains.
      while (seq < 2 * filled && Clock::now() < give_up) {
        std::memcpy(payload, &seq, sizeof seq);
        struct iovec iov = {payload, kSize};
        const SendResult r = channel.send(1, &iov, 1);
        ASSERT_NE(r, SendResult::error) << channel.error().to_string();
        if (r == SendResult::ok) ++seq;
        ReceivedMessage got[4];
        ASSERT_EQ(channel.poll(got, 4), 0);
        if (r == SendResult::no_resource) std::this_thread::yield();
      }
      total.store(seq);
      while (!channel.flushed() && Clock::now() < give_up) std::this_thread::yield();
      flushed.store(true);
    } else {
      while (!full.load() && Clock::now() < give_up) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::uint64_t expect = 0;
      while ((total.load() == 0 || expect < total.load()) && Clock::now() < give_up) {
        ReceivedMessage got[16];
        const int k = channel.poll(got, 16);
        ASSERT_GE(k, 0) << channel.error().to_string();
        for (int m = 0; m < k; ++m) {
          ASSERT_EQ(got[m].size, kSize);
          std::uint64_t seq = 0;
          std::memcpy(&seq, got[m].data, sizeof seq);
          ASSERT_EQ(seq, expect) << "lost, duplicated or reordered";
          ++expect;
        }
        if (k == 0) std::this_thread::yield();
      }
      EXPECT_EQ(expect, total.load());
      // An acknowledging transport (dpdk) acks from poll(): keep polling, taking nothing more,
      // until the sender's flushed() saw the last ack (it may still have been delayed when the
      // last message was handed out).
      while (!flushed.load() && Clock::now() < give_up) {
        ReceivedMessage got[1];
        ASSERT_EQ(channel.poll(got, 1), 0);
        std::this_thread::yield();
      }
    }
  });
}

TEST_P(DriverConformance, RejectsOversizedSend) {
  DriverCluster cluster(config(2, 1, 1000));
  ASSERT_TRUE(cluster.start().ok());
  Channel& channel = cluster.driver(0).channel(0);
  std::byte payload[1001] = {};
  struct iovec iov[2] = {{payload, 600}, {payload + 600, 401}};
  EXPECT_EQ(channel.send(1, iov, 2), SendResult::error);
  EXPECT_EQ(channel.error().code(), ErrorCode::invalid_argument);
  EXPECT_NE(channel.error().message().find("exceeds the max message of 1000 bytes"), std::string::npos)
      << channel.error().message();
}

TEST_P(DriverConformance, MaxMessageAndEmptyMessageArrive) {
  DriverCluster cluster(config(2, 1, 1000));
  ASSERT_TRUE(cluster.start().ok());
  std::vector<std::byte> big(1000, std::byte{0x5a});
  struct iovec iov[2] = {{big.data(), 1000}, {nullptr, 0}};
  ASSERT_EQ(cluster.driver(0).channel(0).send(1, &iov[0], 1), SendResult::ok);
  ASSERT_EQ(cluster.driver(0).channel(0).send(1, &iov[1], 1), SendResult::ok);
  std::vector<std::uint32_t> sizes;
  const auto give_up = Clock::now() + kTestDeadline;
  while (sizes.size() < 2 && Clock::now() < give_up) {
    ReceivedMessage got[4];
    ASSERT_GE(cluster.driver(0).channel(0).poll(got, 4), 0);  // progresses tcp's queue
    const int k = cluster.driver(1).channel(0).poll(got, 4);
    ASSERT_GE(k, 0);
    for (int m = 0; m < k; ++m) {
      EXPECT_EQ(got[m].peer, 0u);
      if (got[m].size == 1000) {
        EXPECT_EQ(std::memcmp(got[m].data, big.data(), 1000), 0);
      }
      sizes.push_back(got[m].size);
    }
    if (k == 0) std::this_thread::yield();
  }
  EXPECT_EQ(sizes, (std::vector<std::uint32_t>{1000, 0}));
}

// What the descriptor says the driver can do, it does, and what it says it cannot, it refuses:
// events <=> every channel has a wait_fd; no zero-copy => register_memory declines; no peer
// reads => read_peer_memory is unsupported. (Zero-copy and peer reads that are possible may
// still be declined on a given machine: shm's peer reads need ptrace rights, dpdk's zero-copy
// a multi-segment port.)
TEST_P(DriverConformance, CapabilitiesMatchTheChannels) {
  const transport::DriverDescriptor* descriptor = transport::find_driver(GetParam());
  ASSERT_NE(descriptor, nullptr);
  const transport::DriverCapabilities& caps = descriptor->capabilities;
  DriverCluster cluster(config(2, 2));
  Status started = cluster.start();
  ASSERT_TRUE(started.ok()) << started.to_string();
  for (std::uint32_t self = 0; self < 2; ++self)
    for (std::uint32_t c = 0; c < 2; ++c) {
      EXPECT_EQ(cluster.driver(self).channel(c).wait_fd() >= 0, caps.events) << "process " << self << " channel " << c;
      // A driver that resends lost frames needs the receiver's acknowledgements.
      EXPECT_EQ(cluster.driver(self).channel(c).acknowledges_when_polled(), caps.recovers_loss)
          << "process " << self << " channel " << c;
    }
  std::vector<std::byte> buffer(1 << 16);
  transport::UserMemory memory;
  if (!caps.zero_copy) {
    EXPECT_FALSE(cluster.driver(0).register_memory(buffer.data(), buffer.size(), &memory));
  } else if (cluster.driver(0).register_memory(buffer.data(), buffer.size(), &memory)) {
    cluster.driver(0).forget_memory(buffer.data(), buffer.size());
  }
  if (!caps.reads_peer_memory) {
    std::uint64_t word = 0;
    EXPECT_FALSE(cluster.driver(0).channel(0).reads_peer_memory());
    EXPECT_EQ(cluster.driver(0).channel(0).read_peer_memory(1, 0, &word, sizeof word).code(), ErrorCode::unsupported);
  }
}

TEST(DriverRegistry, DescriptorsAreListedByPreference) {
  const auto& drivers = transport::built_in_drivers();
  ASSERT_FALSE(drivers.empty());
  for (std::size_t i = 1; i < drivers.size(); ++i) EXPECT_LE(drivers[i - 1]->preference, drivers[i]->preference);
  for (const transport::DriverDescriptor* d : drivers) {
    EXPECT_EQ(transport::find_driver(d->name), d);
    EXPECT_NE(d->create, nullptr) << d->name;
  }
  EXPECT_EQ(transport::find_driver("carrier-pigeon"), nullptr);
}

TEST(DriverRegistry, UnknownDriverListsTheAvailableOnes) {
  transport::DriverContext ctx;
  std::unique_ptr<transport::Driver> driver;
  Status status = transport::create_driver("carrier-pigeon", ctx, &driver);
  EXPECT_EQ(status.code(), ErrorCode::unsupported);
  EXPECT_NE(status.message().find("carrier-pigeon"), std::string::npos);
  for (const std::string& name : transport::available_drivers())
    EXPECT_NE(status.message().find(name), std::string::npos) << status.message();
}

// Every driver that builds has its folder's option table, and SPARCOLL_TRANSPORT takes every
// table's name (and auto) and nothing else; each table's rows are in the configuration table.
TEST(DriverRegistry, EveryDriverHasItsOptionTableAndTransportTakesTheirNames) {
  std::vector<std::string> tables;
  for (std::size_t i = 0; kDriverOptionTables[i] != nullptr; ++i) {
    const DriverOptionTable& table = *kDriverOptionTables[i];
    tables.push_back(table.driver);
    Options o;
    EXPECT_TRUE(set_config_value(&o, "transport", table.driver).ok()) << table.driver;
    const auto& all = config_variables();
    for (const ConfigVariable& row : table.variables())
      EXPECT_TRUE(std::any_of(all.begin(), all.end(), [&](const ConfigVariable& v) { return std::string(v.name) == row.name; }))
          << row.name;
  }
  for (const std::string& name : transport::available_drivers())
    EXPECT_NE(std::find(tables.begin(), tables.end(), name), tables.end()) << name << " has no option table";
  Options o;
  EXPECT_TRUE(set_config_value(&o, "transport", "auto").ok());
  EXPECT_FALSE(set_config_value(&o, "transport", "carrier-pigeon").ok());
}

TEST(DriverRegistry, BuildsShmAndTcp) {
  const auto names = transport::available_drivers();
  EXPECT_NE(std::find(names.begin(), names.end(), "shm"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "tcp"), names.end());
}

INSTANTIATE_TEST_SUITE_P(Drivers, DriverConformance, ::testing::ValuesIn(transport::available_drivers()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace sparcoll::test
