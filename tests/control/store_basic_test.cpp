// The rendezvous store's normal operation: several clients on threads, blocking get, counters.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "store_test_util.hpp"

namespace sparcoll::control::test {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

TEST(StoreBasic, PicksAPortAndReportsTheLocalAddress) {
  auto server = start_server();
  ASSERT_TRUE(server);
  EXPECT_NE(server->port(), 0);
  auto store = connect_ok(*server, "rank 0");
  ASSERT_TRUE(store);
  EXPECT_EQ(store->local_address(), "127.0.0.1");
}

TEST(StoreBasic, SetThenGetAcrossClients) {
  auto server = start_server();
  ASSERT_TRUE(server);
  auto a = connect_ok(*server, "rank 0");
  auto b = connect_ok(*server, "rank 1");
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->set("addr/0", "10.0.0.1:4000").ok());
  std::string value;
  Status st = b->get("addr/0", 1000, &value);
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(value, "10.0.0.1:4000");
  // Overwrite, and binary values with NUL bytes survive.
  const std::string binary("a\0b\xff", 4);
  ASSERT_TRUE(b->set("addr/0", binary).ok());
  ASSERT_TRUE(a->get("addr/0", 1000, &value).ok());
  EXPECT_EQ(value, binary);
}

TEST(StoreBasic, GetBlocksUntilALaterSet) {
  auto server = start_server();
  ASSERT_TRUE(server);
  auto reader = connect_ok(*server, "rank 1");
  auto writer = connect_ok(*server, "rank 0");
  ASSERT_TRUE(reader && writer);
  std::string value;
  Status st;
  std::thread waiter([&] { st = reader->get("late", 5000, &value); });
  std::this_thread::sleep_for(milliseconds(50));
  ASSERT_TRUE(writer->set("late", "here").ok());
  waiter.join();
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(value, "here");
}

TEST(StoreBasic, AddIsAtomicAcrossThreads) {
  auto server = start_server();
  ASSERT_TRUE(server);
  constexpr int kClients = 4;
  constexpr int kAddsEach = 50;
  std::vector<std::thread> threads;
  std::vector<Status> failures(kClients);
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      std::unique_ptr<Store> store;
      failures[c] = Store::connect(address_of(*server), kToken, "rank " + std::to_string(c), 5000, &store);
      for (int i = 0; failures[c].ok() && i < kAddsEach; ++i) {
        std::int64_t now = 0;
        failures[c] = store->add("counter", 1, &now);
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const Status& st : failures) EXPECT_TRUE(st.ok()) << st.to_string();
  auto check = connect_ok(*server, "checker");
  ASSERT_TRUE(check);
  std::int64_t total = 0;
  ASSERT_TRUE(check->add("counter", 0, &total).ok());
  EXPECT_EQ(total, kClients * kAddsEach);
  // Counters read back as decimal text.
  std::string text;
  ASSERT_TRUE(check->get("counter", 1000, &text).ok());
  EXPECT_EQ(text, std::to_string(kClients * kAddsEach));
}

TEST(StoreBasic, AddSupportsNegativeDeltasAndRejectsText) {
  auto server = start_server();
  ASSERT_TRUE(server);
  auto store = connect_ok(*server, "rank 0");
  ASSERT_TRUE(store);
  std::int64_t now = 0;
  ASSERT_TRUE(store->add("n", -5, &now).ok());
  EXPECT_EQ(now, -5);
  ASSERT_TRUE(store->set("word", "hello").ok());
  Status st = store->add("word", 1, &now);
  EXPECT_EQ(st.code(), ErrorCode::invalid_argument);
  EXPECT_EQ(st.message(), "store key 'word' does not hold an integer");
}

TEST(StoreBasic, WaitAtLeastReleasesEveryoneAtTheBarrier) {
  auto server = start_server();
  ASSERT_TRUE(server);
  constexpr int kRanks = 4;
  std::vector<std::thread> threads;
  std::vector<Status> results(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<Store> store;
      results[r] = Store::connect(address_of(*server), kToken, "rank " + std::to_string(r), 5000, &store);
      std::int64_t arrived = 0;
      if (results[r].ok()) results[r] = store->add("barrier", 1, &arrived);
      if (results[r].ok()) results[r] = store->wait_at_least("barrier", kRanks, 5000);
    });
  }
  for (auto& t : threads) t.join();
  for (const Status& st : results) EXPECT_TRUE(st.ok()) << st.to_string();
}

TEST(StoreBasic, WaitAtLeastReturnsAtOnceWhenAlreadyReached) {
  auto server = start_server();
  ASSERT_TRUE(server);
  auto store = connect_ok(*server, "rank 0");
  ASSERT_TRUE(store);
  std::int64_t now = 0;
  ASSERT_TRUE(store->add("done", 3, &now).ok());
  EXPECT_TRUE(store->wait_at_least("done", 2, 1000).ok());
  EXPECT_TRUE(store->wait_at_least("done", 3, 1000).ok());
}

TEST(StoreBasic, GetTimeoutNamesTheKeyAndTheStore) {
  auto server = start_server();
  ASSERT_TRUE(server);
  auto store = connect_ok(*server, "rank 0");
  ASSERT_TRUE(store);
  std::string value;
  Status st = store->get("never/set", 100, &value);
  EXPECT_EQ(st.code(), ErrorCode::timeout);
  EXPECT_EQ(st.message(), "timed out after 100 ms waiting for store key 'never/set' at " + address_of(*server));
  st = store->wait_at_least("count", 2, 50);
  EXPECT_EQ(st.code(), ErrorCode::timeout);
  EXPECT_EQ(st.message(), "timed out after 50 ms waiting for store key 'count' to reach 2 at " + address_of(*server));
}

TEST(StoreBasic, ALateAnswerToATimedOutGetIsIgnored) {
  auto server = start_server();
  ASSERT_TRUE(server);
  auto a = connect_ok(*server, "rank 0");
  auto b = connect_ok(*server, "rank 1");
  ASSERT_TRUE(a && b);
  std::string value;
  EXPECT_EQ(a->get("k", 50, &value).code(), ErrorCode::timeout);
  // The server still answers the abandoned get once k is set; a must not take that answer
  // for its next request.
  ASSERT_TRUE(b->set("k", "first").ok());
  ASSERT_TRUE(b->set("other", "second").ok());
  ASSERT_TRUE(a->get("other", 1000, &value).ok());
  EXPECT_EQ(value, "second");
  ASSERT_TRUE(a->get("k", 1000, &value).ok());
  EXPECT_EQ(value, "first");
}

TEST(StoreBasic, LargeValuesUpToTheLimit) {
  auto server = start_server();
  ASSERT_TRUE(server);
  auto a = connect_ok(*server, "rank 0");
  auto b = connect_ok(*server, "rank 1");
  ASSERT_TRUE(a && b);
  std::string big(4u << 20, 'x');
  big[12345] = 'y';
  ASSERT_TRUE(a->set("big", big).ok());
  std::string value;
  ASSERT_TRUE(b->get("big", 5000, &value).ok());
  EXPECT_EQ(value, big);
}

TEST(StoreBasic, OversizeKeysAndValuesAreRefusedByTheClient) {
  auto server = start_server();
  ASSERT_TRUE(server);
  auto store = connect_ok(*server, "rank 0");
  ASSERT_TRUE(store);
  Status st = store->set(std::string(4097, 'k'), "v");
  EXPECT_EQ(st.code(), ErrorCode::invalid_argument);
  EXPECT_NE(st.message().find("exceeds the 4096-byte limit"), std::string::npos) << st.message();
  st = store->set("k", std::string((16u << 20) + 1, 'v'));
  EXPECT_EQ(st.code(), ErrorCode::invalid_argument);
  EXPECT_EQ(st.message(), "value of 16777217 bytes for store key 'k' exceeds the 16 MiB limit");
  std::string value;
  EXPECT_EQ(store->get("", 10, &value).code(), ErrorCode::invalid_argument);
  // The connection is still usable.
  EXPECT_TRUE(store->set("k", "v").ok());
}

TEST(StoreBasic, ConnectRetriesUntilTheServerStarts) {
  const std::uint16_t port = unused_port();
  const std::string address = "127.0.0.1:" + std::to_string(port);
  std::unique_ptr<Store> store;
  Status st;
  std::thread client([&] { st = Store::connect(address, kToken, "rank 1", 5000, &store); });
  std::this_thread::sleep_for(milliseconds(100));
  std::unique_ptr<StoreServer> server;
  Status started = StoreServer::start(address, kToken, &server);
  client.join();
  ASSERT_TRUE(started.ok()) << started.to_string();
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_TRUE(store->set("x", "1").ok());
}

}  // namespace
}  // namespace sparcoll::control::test
