// rdma behaviour on a real device (Soft-RoCE in scripts/rxe-vm): a wrong GID index fails setup
// clearly, credits run out and come back, a peer whose QPs vanish is named, and so is the process
// a peer lost before it closed. Skipped, with the
// reason, where no rdma device is usable.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "../../drivers/rdma/rdma_driver.hpp"
#include "driver_cluster.hpp"

namespace sparcoll::test {
namespace {

using transport::Channel;
using transport::ReceivedMessage;
using transport::SendResult;
using Clock = std::chrono::steady_clock;

// Polls `channel` until it reports an error (-1) or 5 s pass; returns the last poll's result.
int poll_until_error(Channel& channel) {
  const auto start = Clock::now();
  int k = 0;
  while (k >= 0 && Clock::now() - start < std::chrono::seconds(5)) {
    ReceivedMessage got[4];
    k = channel.poll(got, 4);
    if (k == 0) std::this_thread::yield();
  }
  return k;
}

class DriverRdma : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string reason;
    if (!transport::driver_usable("rdma", &reason)) GTEST_SKIP() << "no rdma device: " << reason;
  }
  static ClusterConfig config(std::uint32_t processes) {
    ClusterConfig c;
    c.driver = "rdma";
    c.processes = processes;
    c.channels = 1;
    c.deadline_ms = 5000;
    return c;
  }
};

TEST_F(DriverRdma, WrongGidIndexFailsSetupListingTheGids) {
  DriverCluster cluster(config(2));
  ASSERT_TRUE(cluster.start_store().ok());
  cluster.options(0).ib_gid_index = 1000;
  const std::vector<Status> results = cluster.create({0});
  EXPECT_EQ(results[0].code(), ErrorCode::unsupported) << results[0].to_string();
  EXPECT_NE(results[0].message().find("no active port has a valid gid at index 1000 (SPARCOLL_IB_GID_INDEX)"), std::string::npos)
      << results[0].message();
  EXPECT_NE(results[0].message().find(" gid 0 "), std::string::npos) << "lists the gids found: " << results[0].message();
}

TEST_F(DriverRdma, CreditsRunOutThenComeBack) {
  DriverCluster cluster(config(2));
  Status started = cluster.start();
  ASSERT_TRUE(started.ok()) << started.to_string();
  Channel& sender = cluster.driver(0).channel(0);
  Channel& receiver = cluster.driver(1).channel(0);
  std::uint64_t seq = 0;
  std::byte payload[512] = {};
  auto send_next = [&] {
    std::memcpy(payload, &seq, sizeof seq);
    struct iovec iov = {payload, sizeof payload};
    return sender.send(1, &iov, 1);
  };
  // The receiver never polls: the sender must hit no_resource after exactly one ring of credits.
  SendResult r;
  while ((r = send_next()) == SendResult::ok) ++seq;
  ASSERT_EQ(r, SendResult::no_resource) << sender.error().to_string();
  EXPECT_GT(seq, 0u);
  EXPECT_EQ(send_next(), SendResult::no_resource) << "credits do not come back by themselves";
  const std::uint64_t ring = seq;
  // The receiver drains; credits return and the sender sends another ring's worth.
  std::uint64_t expect = 0;
  const auto give_up = Clock::now() + std::chrono::seconds(20);
  while (expect < 2 * ring && Clock::now() < give_up) {
    if (seq < 2 * ring && send_next() == SendResult::ok) ++seq;
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
  EXPECT_EQ(expect, 2 * ring);
}

TEST_F(DriverRdma, PeerWhoseQpsVanishIsNamedWithTheQp) {
  DriverCluster cluster(config(2));
  Status started = cluster.start();
  ASSERT_TRUE(started.ok()) << started.to_string();
  transport::rdma::destroy_qps_abruptly(cluster.driver(1));
  Channel& channel = cluster.driver(0).channel(0);
  const auto start = Clock::now();
  ASSERT_EQ(poll_until_error(channel), -1) << "rank 1's vanished qp was never noticed";
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(channel.error().code(), ErrorCode::peer_failure) << channel.error().to_string();
  EXPECT_NE(channel.error().message().find("rank 1 (qp 0x"), std::string::npos) << channel.error().message();
  EXPECT_NE(channel.error().message().find("failed: "), std::string::npos) << channel.error().message();
  std::uint64_t word = 0;
  struct iovec iov = {&word, sizeof word};
  EXPECT_EQ(channel.send(1, &iov, 1), SendResult::error) << "sticky";
}

// Rank 1 loses rank 2 and closes: rank 0, which has not noticed rank 2 yet, reads rank 1's close
// first and must still name rank 2, the process that failed, on every channel (only rank 1's
// channel 0 saw the loss). Without it a job's survivors name whoever left first.
TEST_F(DriverRdma, PeerThatClosedAfterLosingAProcessNamesIt) {
  ClusterConfig c = config(3);
  c.channels = 2;
  DriverCluster cluster(c);
  Status started = cluster.start();
  ASSERT_TRUE(started.ok()) << started.to_string();
  transport::rdma::destroy_qps_abruptly(cluster.driver(2));
  Channel& first = cluster.driver(1).channel(0);
  ASSERT_EQ(poll_until_error(first), -1) << "rank 2's vanished qp was never noticed";
  ASSERT_NE(first.error().message().find("rank 2 (qp 0x"), std::string::npos) << first.error().message();
  cluster.destroy(1);
  for (std::uint32_t ch = 0; ch < 2; ++ch) {
    Channel& channel = cluster.driver(0).channel(ch);
    ASSERT_EQ(poll_until_error(channel), -1) << "rank 1's close was never noticed on channel " << ch;
    EXPECT_EQ(channel.error().code(), ErrorCode::peer_failure) << channel.error().to_string();
    EXPECT_NE(channel.error().message().find("rank 1 (qp 0x"), std::string::npos) << channel.error().message();
    EXPECT_NE(channel.error().message().find("closed its rdma transport after losing rank 2"), std::string::npos)
        << channel.error().message();
  }
}

}  // namespace
}  // namespace sparcoll::test
