// The setup exchange drivers connect through (transport/setup_exchange.hpp), as membership
// carries it over the store (membership/store_exchange.hpp): blobs for everyone and for one
// peer, drivers kept apart, and the timeout that names every peer still missing.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../control/store_test_util.hpp"
#include "membership/store_exchange.hpp"
#include "transport/setup_util.hpp"

namespace sparcoll::membership {
namespace {

using control::test::connect_ok;
using control::test::start_server;

constexpr const char* kPrefix = "exchange-test/";

TEST(StoreExchange, KeysNameJobDriverTopicAndBothEnds) {
  EXPECT_EQ(StoreExchange::key("job/7/", "tcp", "address", 2), "job/7/tcp/address/2");
  EXPECT_EQ(StoreExchange::key("job/7/", "rdma", "qp", 2, 5), "job/7/rdma/qp/2/5");
}

TEST(StoreExchange, BlobForEveryoneReachesEveryPeerAndBlobForOneOnlyThatPeer) {
  auto server = start_server();
  auto s0 = connect_ok(*server, "rank 0"), s1 = connect_ok(*server, "rank 1"), s2 = connect_ok(*server, "rank 2");
  StoreExchange e0(*s0, kPrefix, "rdma", 0), e1(*s1, kPrefix, "rdma", 1), e2(*s2, kPrefix, "rdma", 2);
  ASSERT_TRUE(e0.publish("ready", "yes").ok());
  ASSERT_TRUE(e0.publish_to(1, "qp", "for one").ok());
  ASSERT_TRUE(e0.publish_to(2, "qp", "for two").ok());
  std::string blob;
  ASSERT_TRUE(e1.read(0, "ready", false, 1000, &blob).ok());
  EXPECT_EQ(blob, "yes");
  ASSERT_TRUE(e2.read(0, "ready", false, 1000, &blob).ok());
  EXPECT_EQ(blob, "yes");
  ASSERT_TRUE(e1.read(0, "qp", true, 1000, &blob).ok());
  EXPECT_EQ(blob, "for one");
  ASSERT_TRUE(e2.read(0, "qp", true, 1000, &blob).ok());
  EXPECT_EQ(blob, "for two");
  // Rank 0 published "qp" for 1 and 2 only, never for everyone.
  EXPECT_EQ(e1.read(0, "qp", false, 50, &blob).code(), ErrorCode::timeout);
}

TEST(StoreExchange, TwoDriversTopicsNeverMeet) {
  auto server = start_server();
  auto s0 = connect_ok(*server, "rank 0"), s1 = connect_ok(*server, "rank 1");
  StoreExchange tcp0(*s0, kPrefix, "tcp", 0), dpdk1(*s1, kPrefix, "dpdk", 1), tcp1(*s1, kPrefix, "tcp", 1);
  ASSERT_TRUE(tcp0.publish("address", "127.0.0.1:4000").ok());
  std::string blob;
  EXPECT_EQ(dpdk1.read(0, "address", false, 50, &blob).code(), ErrorCode::timeout);
  ASSERT_TRUE(tcp1.read(0, "address", false, 1000, &blob).ok());
  EXPECT_EQ(blob, "127.0.0.1:4000");
}

TEST(StoreExchange, ReadFromPeersNamesEveryPeerThatNeverPublished) {
  auto server = start_server();
  auto s0 = connect_ok(*server, "rank 0"), s2 = connect_ok(*server, "rank 2");
  StoreExchange e0(*s0, kPrefix, "tcp", 0), e2(*s2, kPrefix, "tcp", 2);
  ASSERT_TRUE(e2.publish("address", "127.0.0.1:4002").ok());
  transport::DriverContext ctx;
  ctx.exchange = &e0;
  ctx.self = 0;
  for (std::uint32_t i = 0; i < 4; ++i) {
    transport::ProcessInfo info;
    info.index = i;
    info.name = "rank " + std::to_string(i);
    ctx.processes.push_back(info);
  }
  const transport::SetupDeadline deadline(200);
  std::vector<std::string> blobs;
  Status status = transport::read_from_peers(ctx, {1, 2, 3}, "address", false, deadline, "tcp",
                                             "publish their tcp addresses", &blobs);
  EXPECT_EQ(status.code(), ErrorCode::timeout);
  EXPECT_EQ(status.message(), "tcp setup timed out after 200 ms waiting for rank 1, rank 3 to publish their tcp addresses");
  status = transport::read_from_peers(ctx, {2}, "address", false, transport::SetupDeadline(1000), "tcp", "publish", &blobs);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(blobs, std::vector<std::string>{"127.0.0.1:4002"});
}

}  // namespace
}  // namespace sparcoll::membership
