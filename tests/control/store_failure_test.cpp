// The rendezvous store when something goes wrong: a wrong job token, an unreachable or vanished
// server, hostile bytes. Each failure must surface quickly as a clear error, never as a hang.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "control/store_wire.hpp"
#include "store_test_util.hpp"

namespace sparcoll::control::test {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// A plain TCP connection for sending bytes a real client never would.
class RawSocket {
 public:
  explicit RawSocket(std::uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
  }
  ~RawSocket() { ::close(fd_); }
  bool connected() const { return connected_; }
  void send(const std::string& bytes) { ASSERT_EQ(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL), (ssize_t)bytes.size()); }
  // Reads until the server closes the connection; false if it is still open after timeout_ms.
  bool closed_by_peer_within(int timeout_ms) {
    const auto deadline = Clock::now() + milliseconds(timeout_ms);
    char buf[4096];
    while (Clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) return true;
    }
    return false;
  }

 private:
  int fd_;
  bool connected_ = false;
};

std::string frame_with_length(std::uint32_t length) {
  std::string bytes(4, '\0');
  for (int i = 0; i < 4; ++i) bytes[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  return bytes;
}

TEST(StoreFailure, WrongTokenIsRejectedWithAuthFailure) {
  auto server = start_server();
  ASSERT_TRUE(server);
  testing::internal::CaptureStderr();
  std::unique_ptr<Store> store;
  Status st = Store::connect(address_of(*server), "not-the-token", "rank 7", 2000, &store);
  // The warning is written by the server thread before it answers.
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_EQ(st.code(), ErrorCode::auth_failure);
  EXPECT_EQ(st.message(), "store at " + address_of(*server) + " rejected our job token");
  EXPECT_EQ(store, nullptr);
  EXPECT_NE(log.find("rank 7 from 127.0.0.1:"), std::string::npos) << log;
  EXPECT_NE(log.find("job token mismatch"), std::string::npos) << log;
}

TEST(StoreFailure, WrongTokenAbortsPendingAndLaterRequestsOfOtherClients) {
  auto server = start_server();
  ASSERT_TRUE(server);
  auto victim = connect_ok(*server, "rank 0");
  auto bystander = connect_ok(*server, "rank 1");
  ASSERT_TRUE(victim && bystander);
  std::string value;
  Status pending;
  Clock::duration waited{};
  std::thread waiter([&] {
    const auto start = Clock::now();
    pending = victim->get("never", 10000, &value);
    waited = Clock::now() - start;
  });
  std::this_thread::sleep_for(milliseconds(50));
  testing::internal::CaptureStderr();
  std::unique_ptr<Store> intruder;
  Status rejected = Store::connect(address_of(*server), "wrong", "rank 3", 2000, &intruder);
  waiter.join();
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(rejected.code(), ErrorCode::auth_failure);

  EXPECT_EQ(pending.code(), ErrorCode::auth_failure);
  const std::string prefix = "rendezvous aborted: rank 3 from 127.0.0.1:";
  EXPECT_EQ(pending.message().rfind(prefix, 0), 0u) << pending.message();
  EXPECT_NE(pending.message().find(" presented a wrong job token"), std::string::npos) << pending.message();
  EXPECT_LT(waited, std::chrono::seconds(5)) << "the abort must not wait for the get's own timeout";

  // Every later request fails the same way, set included.
  std::int64_t n = 0;
  EXPECT_EQ(bystander->add("x", 1, &n).code(), ErrorCode::auth_failure);
  EXPECT_EQ(bystander->wait_at_least("x", 1, 5000).message(), pending.message());
  EXPECT_EQ(bystander->get("y", 5000, &value).message(), pending.message());
  EXPECT_EQ(bystander->set("y", "v").code(), ErrorCode::auth_failure);
}

TEST(StoreFailure, UnreachableStoreTimesOutWithTheAddress) {
  const std::string address = "127.0.0.1:" + std::to_string(unused_port());
  std::unique_ptr<Store> store;
  const auto start = Clock::now();
  Status st = Store::connect(address, kToken, "rank 1", 300, &store);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(3));
  EXPECT_EQ(st.code(), ErrorCode::timeout);
  EXPECT_EQ(st.message(), "rendezvous store at " + address + " unreachable for 300 ms: connection refused");
}

TEST(StoreFailure, BadAddressesAreRefusedUpFront) {
  std::unique_ptr<Store> store;
  Status st = Store::connect("[::1]:29500", kToken, "rank 0", 100, &store);
  EXPECT_EQ(st.code(), ErrorCode::unsupported);
  EXPECT_NE(st.message().find("ipv6 addresses are not supported yet"), std::string::npos) << st.message();
  st = Store::connect("localhost", kToken, "rank 0", 100, &store);
  EXPECT_EQ(st.code(), ErrorCode::invalid_argument);
  EXPECT_EQ(st.message(), "store address 'localhost' is not host:port");
  st = Store::connect("localhost:99999", kToken, "rank 0", 100, &store);
  EXPECT_EQ(st.code(), ErrorCode::invalid_argument);
  std::unique_ptr<StoreServer> server;
  st = StoreServer::start("127.0.0.1:http", kToken, &server);
  EXPECT_EQ(st.code(), ErrorCode::invalid_argument);
  EXPECT_EQ(st.message(), "store address '127.0.0.1:http': port 'http' is not a number");
}

TEST(StoreFailure, PortInUseIsASystemError) {
  auto first = start_server();
  ASSERT_TRUE(first);
  std::unique_ptr<StoreServer> second;
  Status st = StoreServer::start(address_of(*first), kToken, &second);
  EXPECT_EQ(st.code(), ErrorCode::system_error);
  EXPECT_NE(st.message().find("address already in use"), std::string::npos) << st.message();
}

TEST(StoreFailure, ServerGoneFailsPendingAndLaterRequests) {
  auto server = start_server();
  ASSERT_TRUE(server);
  auto store = connect_ok(*server, "rank 1");
  ASSERT_TRUE(store);
  const std::string address = address_of(*server);
  std::string value;
  Status pending;
  std::thread waiter([&] { pending = store->get("never", 10000, &value); });
  std::this_thread::sleep_for(milliseconds(50));
  const auto start = Clock::now();
  server.reset();
  waiter.join();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(pending.code(), ErrorCode::peer_failure);
  EXPECT_EQ(pending.message(), "rendezvous store at " + address + " closed the connection");
  Status later = store->set("k", "v");
  EXPECT_EQ(later.code(), ErrorCode::peer_failure);
  EXPECT_EQ(later.message(), pending.message());
}

TEST(StoreFailure, MalformedFramesCloseOnlyTheirClient) {
  auto server = start_server();
  ASSERT_TRUE(server);
  auto good = connect_ok(*server, "rank 0");
  ASSERT_TRUE(good);
  testing::internal::CaptureStderr();
  {
    RawSocket huge(server->port());  // announces a 4 GiB hello
    ASSERT_TRUE(huge.connected());
    huge.send(frame_with_length(0xffffffffu));
    EXPECT_TRUE(huge.closed_by_peer_within(2000));
  }
  {
    RawSocket http(server->port());  // something else entirely
    ASSERT_TRUE(http.connected());
    http.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    EXPECT_TRUE(http.closed_by_peer_within(2000));
  }
  {
    RawSocket bad_magic(server->port());
    ASSERT_TRUE(bad_magic.connected());
    wire::Hello hello;
    hello.magic = 0x12345678;
    hello.token = kToken;
    bad_magic.send(wire::encode(hello));
    EXPECT_TRUE(bad_magic.closed_by_peer_within(2000));
  }
  {
    RawSocket garbage(server->port());  // a proper hello, then a request of unknown type
    ASSERT_TRUE(garbage.connected());
    wire::Hello hello;
    hello.token = kToken;
    hello.identity = "rank 9";
    garbage.send(wire::encode(hello));
    garbage.send(frame_with_length(3) + std::string("\x09\x01\x02", 3));
    EXPECT_TRUE(garbage.closed_by_peer_within(2000));
  }
  {
    RawSocket truncated(server->port());  // a set whose value length runs past the frame
    ASSERT_TRUE(truncated.connected());
    wire::Hello hello;
    hello.token = kToken;
    truncated.send(wire::encode(hello));
    wire::Request set;
    set.type = wire::MsgType::set;
    set.key = "k";
    set.value = "value";
    std::string bytes = wire::encode(set);
    bytes[0] = static_cast<char>(bytes[0] - 2);  // shorten the frame by two bytes
    truncated.send(bytes.substr(0, bytes.size() - 2));
    EXPECT_TRUE(truncated.closed_by_peer_within(2000));
  }
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("exceeds the"), std::string::npos) << log;
  EXPECT_NE(log.find("bad magic"), std::string::npos) << log;
  EXPECT_NE(log.find("rank 9 from 127.0.0.1:"), std::string::npos) << log;
  EXPECT_NE(log.find("malformed request"), std::string::npos) << log;
  // The server and its well-behaved client carry on; nothing from the bad frames was stored.
  ASSERT_TRUE(good->set("still", "alive").ok());
  std::string value;
  ASSERT_TRUE(good->get("still", 1000, &value).ok());
  EXPECT_EQ(value, "alive");
  EXPECT_EQ(good->get("k", 50, &value).code(), ErrorCode::timeout);
  auto newcomer = connect_ok(*server, "rank 1");
  EXPECT_TRUE(newcomer);
}

}  // namespace
}  // namespace sparcoll::control::test
