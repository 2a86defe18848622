// dpdk-only behaviour (memif mode, several drivers in this one process, one EAL): hostile frames
// through the injection hook, window back-pressure, a peer that leaves or goes silent
// mid-stream, the frame-size cap on max_message, two jobs in one process, and the dpdk options.
// Delivery under loss and zero-copy sends are the drivers' contract: driver_delivery_test.cpp. Skipped, with the reason, where the EAL cannot start.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "../../drivers/dpdk/dpdk_driver.hpp"
#include "../control/config_env_fixture.hpp"
#include "common/config.hpp"
#include "driver_cluster.hpp"
#include "driver_exchange.hpp"

namespace sparcoll::test {
namespace {

using transport::Channel;
using transport::ChannelCounters;
using transport::ReceivedMessage;
using transport::SendResult;
namespace dpdk = transport::dpdk;
using Clock = std::chrono::steady_clock;

constexpr auto kTestDeadline = std::chrono::seconds(30);

class DriverDpdk : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string reason;
    if (!transport::driver_usable("dpdk", &reason)) GTEST_SKIP() << "dpdk is not usable here: " << reason;
  }
  static ClusterConfig config(std::uint32_t processes, std::uint32_t channels, std::uint32_t max_message = 4096) {
    ClusterConfig c;
    c.driver = "dpdk";
    c.processes = processes;
    c.channels = channels;
    c.max_message = max_message;
    c.deadline_ms = 10000;
    return c;
  }
};

// Polls `channel` `rounds` times; returns the messages it handed out.
int poll_rounds(Channel& channel, int rounds) {
  int messages = 0;
  for (int i = 0; i < rounds; ++i) {
    ReceivedMessage got[8];
    const int k = channel.poll(got, 8);
    EXPECT_GE(k, 0) << channel.error().to_string();
    if (k > 0) messages += k;
  }
  return messages;
}

TEST_F(DriverDpdk, HostileFramesAreCountedAndNeverDelivered) {
  DriverCluster cluster(config(3, 2));
  Status started = cluster.start();
  ASSERT_TRUE(started.ok()) << started.to_string();
  ASSERT_EQ(dpdk::mode_for_test(cluster.driver(1)), "memif");
  // Some real traffic first, so rank 1 has delivered seqs 0..9 from rank 0.
  std::atomic<bool> stop{false};
  Channel& sender = cluster.driver(0).channel(0);
  Channel& receiver = cluster.driver(1).channel(0);
  auto deliver = [&](std::uint64_t first, std::uint64_t count) {
    std::uint64_t next = first;
    std::uint64_t expect = first;
    const auto give_up = Clock::now() + std::chrono::seconds(10);
    while (expect < first + count && Clock::now() < give_up) {
      if (next < first + count) {
        std::uint64_t value = next;
        struct iovec iov = {&value, sizeof value};
        if (sender.send(1, &iov, 1) == SendResult::ok) ++next;
      }
      ReceivedMessage got[8];
      ASSERT_GE(sender.poll(got, 8), 0) << sender.error().to_string();
      const int k = receiver.poll(got, 8);
      ASSERT_GE(k, 0) << receiver.error().to_string();
      for (int m = 0; m < k; ++m) {
        ASSERT_EQ(got[m].size, sizeof(std::uint64_t));
        std::uint64_t value = 0;
        std::memcpy(&value, got[m].data, sizeof value);
        ASSERT_EQ(value, expect++);
      }
    }
    ASSERT_EQ(expect, first + count);
  };
  deliver(0, 10);
  (void)stop;

  dpdk::FrameHeader valid;
  ASSERT_TRUE(dpdk::frame_header_for_test(cluster.driver(1), 0, 0, &valid));
  const std::uint64_t payload = 0xdeadbeef;
  auto frame_of = [&](const dpdk::FrameHeader& h, bool udp_checksum) {
    std::vector<std::uint8_t> f(dpdk::kHeadersLen + h.payload_len);
    dpdk::build_frame(f.data(), h, &payload, udp_checksum);
    return f;
  };
  auto data_header = [&](std::uint64_t seq) {
    dpdk::FrameHeader h = valid;
    h.seq = seq;
    h.payload_len = sizeof payload;
    return h;
  };

  struct Case {
    std::string what;
    std::vector<std::uint8_t> frame;
    std::uint32_t channel = 0;  // where it ends up being validated
  };
  std::vector<Case> cases;
  auto add = [&](std::string what, std::function<void(dpdk::FrameHeader&)> edit,
                 std::function<void(std::vector<std::uint8_t>&)> mutate = nullptr, std::uint32_t channel = 0) {
    dpdk::FrameHeader h = data_header(20);
    if (edit) edit(h);
    std::vector<std::uint8_t> f = frame_of(h, false);
    if (mutate) mutate(f);
    cases.push_back(Case{std::move(what), std::move(f), channel});
  };
  add("truncated", nullptr, [](auto& f) { f.resize(70); });
  add("truncated inside the transport header", nullptr, [](auto& f) { f.resize(dpdk::kHeadersLen - 1); });
  add("wrong magic", nullptr, [](auto& f) { f[dpdk::field::magic] ^= 0xff; });
  add("wrong version", nullptr, [](auto& f) { f[dpdk::field::version] = 7; });
  add("wrong type", nullptr, [](auto& f) { f[dpdk::field::type] = 9; });
  add("wrong job id", [](auto& h) { h.job_id ^= 1; });
  add("dst not self", [](auto& h) { h.dst = 2; });
  add("unknown src", [](auto& h) { h.src = 17; });
  add("src is self", [](auto& h) { h.src = 1; });
  add("src rank 2 with rank 0's addresses", [](auto& h) { h.src = 2; });
  add("channel out of range", [](auto& h) { h.channel = 5; });
  add("channel 1 on channel 0's udp port (validated by channel 1)", [](auto& h) { h.channel = 1; }, nullptr, 1);
  add("ip length beyond the frame", nullptr, [](auto& f) { f[16] = 0x20; });
  add("ip length below the headers", nullptr, [](auto& f) { f[16] = 0; f[17] = 60; });
  add("ip length short of the payload", nullptr, [](auto& f) { f[17] -= 4; });
  add("udp length lie", nullptr, [](auto& f) { f[39] += 8; });
  add("payload length lie", [](auto& h) { h.payload_len = sizeof payload; }, [](auto& f) { f[dpdk::field::payload_len] = 4; });
  add("bad ip checksum", nullptr, [](auto& f) { f[25] ^= 0x55; });
  add("bad udp checksum", nullptr, [](auto& f) { f[40] = 0x12; f[41] = 0x34; });
  add("ip fragment", nullptr, [](auto& f) { f[20] = 0x20; });
  add("not udp", nullptr, [](auto& f) { f[23] = 6; });
  add("wrong destination mac", [](auto& h) { h.dst_mac.bytes[5] ^= 1; });
  add("wrong destination ip", [](auto& h) { h.dst_ip ^= 1; });
  add("wrong source ip", [](auto& h) { h.src_ip ^= 1; });
  add("wrong source mac", [](auto& h) { h.src_mac.bytes[0] ^= 2; });
  add("wrong udp destination port", [](auto& h) { h.dst_port += 1; });
  add("acknowledges data never sent", [](auto& h) { h.ack = 1000; });
  add("sack beyond what was sent", [](auto& h) { h.sack = std::uint64_t{1} << 40; });
  add("seq far beyond the window", [](auto& h) { h.seq = 1u << 20; });
  add("control frame with a payload", [](auto& h) { h.type = dpdk::FrameType::ack; });
  {
    dpdk::FrameHeader h = data_header(20);
    std::vector<std::uint8_t> f = frame_of(h, true);
    f[dpdk::kHeadersLen] ^= 1;  // payload corrupted under a valid udp checksum
    cases.push_back(Case{"payload corrupted under the udp checksum", std::move(f), 0});
  }

  Channel& channel1 = cluster.driver(1).channel(1);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const ChannelCounters before = c.channel == 0 ? receiver.counters() : channel1.counters();
    ASSERT_TRUE(dpdk::inject_for_test(cluster.driver(1), 0, c.frame.data(), c.frame.size()));
    EXPECT_EQ(poll_rounds(receiver, 3), 0);
    EXPECT_EQ(poll_rounds(channel1, 3), 0);
    const ChannelCounters after = c.channel == 0 ? receiver.counters() : channel1.counters();
    EXPECT_EQ(after.get("dropped_invalid"), before.get("dropped_invalid") + 1);
    EXPECT_EQ(after.get("packets_received"), before.get("packets_received") + 1);
    EXPECT_TRUE(receiver.error().ok()) << receiver.error().to_string();
  }

  // Well-formed frames are accepted: a duplicate of seq 3 is counted as such, an ack that
  // acknowledges nothing new is not an error. So each case above failed on its one lie.
  const ChannelCounters before = receiver.counters();
  std::vector<std::uint8_t> duplicate = frame_of(data_header(3), true);
  ASSERT_TRUE(dpdk::inject_for_test(cluster.driver(1), 0, duplicate.data(), duplicate.size()));
  dpdk::FrameHeader ack = valid;
  ack.type = dpdk::FrameType::ack;
  std::vector<std::uint8_t> ack_frame = frame_of(ack, false);
  ASSERT_TRUE(dpdk::inject_for_test(cluster.driver(1), 0, ack_frame.data(), ack_frame.size()));
  EXPECT_EQ(poll_rounds(receiver, 3), 0);
  const ChannelCounters after = receiver.counters();
  EXPECT_EQ(after.get("duplicates"), before.get("duplicates") + 1);
  EXPECT_EQ(after.get("dropped_invalid"), before.get("dropped_invalid"));

  // The channel still works.
  deliver(10, 300);
  EXPECT_TRUE(receiver.error().ok());
}

TEST_F(DriverDpdk, FullWindowGivesBackPressureUntilTheReceiverPolls) {
  DriverCluster cluster(config(2, 1));
  Status started = cluster.start();
  ASSERT_TRUE(started.ok()) << started.to_string();
  Channel& sender = cluster.driver(0).channel(0);
  Channel& receiver = cluster.driver(1).channel(0);
  std::uint64_t seq = 0;
  auto send_next = [&] {
    std::uint64_t value = seq;
    struct iovec iov = {&value, sizeof value};
    return sender.send(1, &iov, 1);
  };
  SendResult r;
  while ((r = send_next()) == SendResult::ok) ++seq;
  ASSERT_EQ(r, SendResult::no_resource) << sender.error().to_string();
  EXPECT_EQ(seq, 256u) << "one window (the receiver's initial room) of messages";
  // Without the receiver polling, no room comes back, however long the sender polls.
  const auto until = Clock::now() + std::chrono::milliseconds(50);
  while (Clock::now() < until) {
    ReceivedMessage got[4];
    ASSERT_EQ(sender.poll(got, 4), 0);
    ASSERT_EQ(send_next(), SendResult::no_resource);
  }
  EXPECT_FALSE(sender.flushed());
  std::uint64_t expect = 0;
  const auto give_up = Clock::now() + std::chrono::seconds(10);
  while (expect < 1000 && Clock::now() < give_up) {
    if (seq < 1000 && send_next() == SendResult::ok) ++seq;
    ReceivedMessage got[8];
    ASSERT_GE(sender.poll(got, 8), 0) << sender.error().to_string();
    const int k = receiver.poll(got, 8);
    ASSERT_GE(k, 0) << receiver.error().to_string();
    for (int m = 0; m < k; ++m) {
      std::uint64_t value = 0;
      std::memcpy(&value, got[m].data, sizeof value);
      ASSERT_EQ(value, expect++);
    }
  }
  EXPECT_EQ(expect, 1000u);
}

TEST_F(DriverDpdk, PeerDestroyedMidStreamIsNamed) {
  DriverCluster cluster(config(2, 1));
  Status started = cluster.start();
  ASSERT_TRUE(started.ok()) << started.to_string();
  std::atomic<std::uint64_t> received{0};
  std::atomic<bool> failed{false};
  Status error;
  std::thread rank0([&] {
    Channel& channel = cluster.driver(0).channel(0);
    std::byte payload[512] = {};
    const auto give_up = Clock::now() + std::chrono::seconds(10);
    while (Clock::now() < give_up) {
      struct iovec iov = {payload, sizeof payload};
      const SendResult r = channel.send(1, &iov, 1);
      ReceivedMessage got[8];
      if (r == SendResult::error || channel.poll(got, 8) < 0) {
        error = channel.error();
        failed = true;
        return;
      }
    }
  });
  // Rank 1 receives a while, then shuts down while rank 0 keeps sending.
  Channel& channel = cluster.driver(1).channel(0);
  const auto give_up = Clock::now() + std::chrono::seconds(10);
  while (received.load() < 2000 && Clock::now() < give_up) {
    ReceivedMessage got[8];
    const int k = channel.poll(got, 8);
    if (k < 0) break;
    received += static_cast<std::uint64_t>(k);
  }
  EXPECT_GE(received.load(), 2000u) << channel.error().to_string();
  const auto destroyed_at = Clock::now();
  cluster.destroy(1);
  rank0.join();
  ASSERT_TRUE(failed.load()) << "rank 0 never noticed rank 1 leaving";
  EXPECT_LT(Clock::now() - destroyed_at, std::chrono::seconds(3));
  EXPECT_EQ(error.code(), ErrorCode::peer_failure) << error.to_string();
  EXPECT_NE(error.message().find("rank 1"), std::string::npos) << error.message();
  EXPECT_NE(error.message().find("closed its dpdk transport"), std::string::npos) << error.message();
}

TEST_F(DriverDpdk, SilentPeerIsNamedWithItsAddressAfterTheTimeout) {
  ClusterConfig c = config(2, 1);
  c.deadline_ms = 1500;  // also the liveness timeout
  DriverCluster cluster(c);
  Status started = cluster.start();
  ASSERT_TRUE(started.ok()) << started.to_string();
  Channel& sender = cluster.driver(0).channel(0);
  // One round trip, then rank 1 stops polling for good (as a hung or descheduled process).
  std::uint64_t value = 1;
  struct iovec iov = {&value, sizeof value};
  ASSERT_EQ(sender.send(1, &iov, 1), SendResult::ok);
  int got_one = 0;
  const auto give_up = Clock::now() + std::chrono::seconds(5);
  while (got_one == 0 && Clock::now() < give_up) {
    ReceivedMessage got[4];
    ASSERT_GE(sender.poll(got, 4), 0);
    got_one = cluster.driver(1).channel(0).poll(got, 4);
  }
  ASSERT_EQ(got_one, 1);
  for (int i = 0; i < 10; ++i) ASSERT_EQ(sender.send(1, &iov, 1), SendResult::ok);
  const auto start = Clock::now();
  int k = 0;
  while (k >= 0 && Clock::now() - start < std::chrono::seconds(10)) {
    ReceivedMessage got[4];
    k = sender.poll(got, 4);
    std::this_thread::yield();
  }
  const auto took = Clock::now() - start;
  ASSERT_LT(k, 0) << "the silent peer was never reported";
  EXPECT_GE(took, std::chrono::milliseconds(1400));
  EXPECT_LT(took, std::chrono::milliseconds(4000));
  const Status& error = sender.error();
  EXPECT_EQ(error.code(), ErrorCode::peer_failure) << error.to_string();
  for (const char* part : {"rank 1", "mac 02:53:43:00:00:01", "10.0.0.2:47000", "acknowledged nothing",
                           "retransmissions tried"})
    EXPECT_NE(error.message().find(part), std::string::npos) << part << " missing in: " << error.message();
  EXPECT_GT(sender.counters().get("retransmitted"), 0u);
}

TEST_F(DriverDpdk, MaxMessageIsWhatOneFrameCarries) {
  DriverCluster cluster(config(2, 1, 65536));
  Status started = cluster.start();
  ASSERT_TRUE(started.ok()) << started.to_string();
  Channel& sender = cluster.driver(0).channel(0);
  Channel& receiver = cluster.driver(1).channel(0);
  // memif mode: an IP MTU of 9000 minus IPv4, UDP and the transport header.
  const std::uint32_t max = 9000 - 20 - 8 - 62;
  EXPECT_EQ(sender.max_message(), max);
  EXPECT_EQ(receiver.max_message(), max);
  std::vector<std::byte> big(max + 1);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<std::byte>(i * 13);
  struct iovec iov = {big.data(), max};
  ASSERT_EQ(sender.send(1, &iov, 1), SendResult::ok);
  bool arrived = false;
  const auto give_up = Clock::now() + std::chrono::seconds(5);
  while (!arrived && Clock::now() < give_up) {
    ReceivedMessage got[4];
    ASSERT_GE(sender.poll(got, 4), 0);
    const int k = receiver.poll(got, 4);
    ASSERT_GE(k, 0);
    if (k == 1) {
      ASSERT_EQ(got[0].size, max);
      EXPECT_EQ(std::memcmp(got[0].data, big.data(), max), 0);
      arrived = true;
    }
  }
  EXPECT_TRUE(arrived);
  iov.iov_len = max + 1;
  EXPECT_EQ(sender.send(1, &iov, 1), SendResult::error);
  EXPECT_EQ(sender.error().code(), ErrorCode::invalid_argument);
  EXPECT_NE(sender.error().message().find("exceeds the max message of " + std::to_string(max) + " bytes"), std::string::npos)
      << sender.error().message();
  EXPECT_NE(sender.error().message().find("SPARCOLL_MAX_MESSAGE"), std::string::npos) << sender.error().message();
}

TEST_F(DriverDpdk, TwoJobsInOneProcessStayApart) {
  DriverCluster first(config(2, 2));
  DriverCluster second(config(2, 2));
  Status started = first.start();
  ASSERT_TRUE(started.ok()) << started.to_string();
  started = second.start();
  ASSERT_TRUE(started.ok()) << started.to_string();
  std::thread other([&] { exchange_all(second, 500); });
  exchange_all(first, 500);
  other.join();
  // A frame of the first job injected into the second fails the job id check.
  dpdk::FrameHeader h;
  ASSERT_TRUE(dpdk::frame_header_for_test(first.driver(1), 0, 0, &h));
  h.payload_len = 0;
  std::vector<std::uint8_t> frame(dpdk::kHeadersLen);
  dpdk::build_frame(frame.data(), h, nullptr, false);
  const std::uint64_t before = second.driver(1).channel(0).counters().get("dropped_invalid");
  ASSERT_TRUE(dpdk::inject_for_test(second.driver(1), 0, frame.data(), frame.size()));
  EXPECT_EQ(poll_rounds(second.driver(1).channel(0), 2), 0);
  EXPECT_EQ(second.driver(1).channel(0).counters().get("dropped_invalid"), before + 1);
}

// Zero-copy: send(…, UserMemory) reads the registered bytes in place (the large parts; small
// parts and memory outside the registration are copied), every 7th data frame is dropped so
// retransmissions read the user memory again, and user_memory_released() turns true only once
// every such frame is acknowledged. The buffer is then rewritten and sent again: the second
// round must carry the new bytes, the first round's the old ones.
using DpdkOptions = ConfigEnvFixture;

TEST_F(DpdkOptions, VariablesReachTheirFieldsAndAreValidated) {
  set("SPARCOLL_DPDK_EAL_ARGS", "--vdev=net_af_packet0,iface=veth0 -l 1");
  set("SPARCOLL_DPDK_PORT", "0");
  set("SPARCOLL_DPDK_IP", "10.77.0.2");
  set("SPARCOLL_DPDK_UDP_PORT", "48000");
  set("SPARCOLL_DPDK_DROP_EVERY", "5");
  set("SPARCOLL_DPDK_MEMIF_ZERO_COPY", "off");
  Options o = Options::from_env();
  EXPECT_EQ(o.dpdk_memif_zero_copy, "off");
  EXPECT_EQ(o.dpdk_eal_args, "--vdev=net_af_packet0,iface=veth0 -l 1");
  EXPECT_EQ(o.dpdk_port, 0u);
  EXPECT_EQ(o.dpdk_ip, "10.77.0.2");
  EXPECT_EQ(o.dpdk_udp_port, 48000u);
  EXPECT_EQ(o.dpdk_drop_every, 5u);
  o.rank = 0;
  o.world_size = 1;
  EXPECT_TRUE(o.validate().ok()) << o.validate().to_string();
  o.dpdk_udp_port = 70000;
  o.dpdk_ip = "10.77.0";
  o.dpdk_port = 65536;
  const std::string problems = o.validate().message();
  EXPECT_NE(problems.find("dpdk_udp_port=70000 (SPARCOLL_DPDK_UDP_PORT) must be between 1 and 65535"), std::string::npos)
      << problems;
  EXPECT_NE(problems.find("dpdk_ip='10.77.0' (SPARCOLL_DPDK_IP) must be an ipv4 address"), std::string::npos) << problems;
  EXPECT_NE(problems.find("dpdk_port=65536 (SPARCOLL_DPDK_PORT) must be between 0 and 65535"), std::string::npos)
      << problems;
  set("SPARCOLL_DPDK_UDP_PORT", "0");
  EXPECT_THROW((void)Options::from_env(), Error);
  set("SPARCOLL_DPDK_UDP_PORT", "48000");
  set("SPARCOLL_DPDK_MEMIF_ZERO_COPY", "on");  // only auto and off
  EXPECT_THROW((void)Options::from_env(), Error);
  // The documented defaults are the initialisers.
  const Options defaults;
  for (const ConfigVariable& v : config_variables()) {
    if (std::string(v.field).rfind("dpdk_", 0) != 0 || v.default_text[0] == '(') continue;
    Options parsed;
    ASSERT_TRUE(v.parse(v.default_text, &parsed).ok()) << v.name;
    EXPECT_EQ(parsed.dpdk_port, defaults.dpdk_port) << v.name;
    EXPECT_EQ(parsed.dpdk_udp_port, defaults.dpdk_udp_port) << v.name;
    EXPECT_EQ(parsed.dpdk_drop_every, defaults.dpdk_drop_every) << v.name;
  }
}

}  // namespace
}  // namespace sparcoll::test
