// The rendezvous store when something goes wrong: a wrong job token, an unreachable or vanished
// server, hostile bytes. Each failure must surface quickly as a clear error, never as a hang.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

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
  EXPECT_EQ(st.message(), "store at " + address_of(*server) +
                              " rejected our job token (SPARCOLL_JOB_TOKEN must be the same secret on every process of "
                              "the job)");
  EXPECT_EQ(store, nullptr);
  EXPECT_NE(log.find("closing the connection from 127.0.0.1:"), std::string::npos) << log;
  EXPECT_NE(log.find("claiming to be 'rank 7': wrong job token"), std::string::npos) << log;
}

// One wrong hello once ended every job (the server aborted the whole rendezvous): whoever can
// reach the port could end a job with one packet. Now only that connection ends.
TEST(StoreFailure, WrongTokenClosesOnlyThatConnection) {
  auto server = start_server();
  ASSERT_TRUE(server);
  auto waiter_store = connect_ok(*server, "rank 0");
  auto bystander = connect_ok(*server, "rank 1");
  ASSERT_TRUE(waiter_store && bystander);
  std::string value;
  Status pending;
  std::thread waiter([&] { pending = waiter_store->get("later", 10000, &value); });
  std::this_thread::sleep_for(milliseconds(50));
  testing::internal::CaptureStderr();
  for (int i = 0; i < 5; ++i) {
    std::unique_ptr<Store> intruder;
    EXPECT_EQ(Store::connect(address_of(*server), "wrong", "rank 3", 2000, &intruder).code(), ErrorCode::auth_failure);
  }
  const std::string log = testing::internal::GetCapturedStderr();
  // Every request of the job's own clients still works, the pending one included.
  ASSERT_TRUE(bystander->set("later", "v").ok());
  waiter.join();
  EXPECT_TRUE(pending.ok()) << pending.to_string();
  EXPECT_EQ(value, "v");
  std::int64_t n = 0;
  EXPECT_TRUE(bystander->add("x", 1, &n).ok());
  EXPECT_TRUE(connect_ok(*server, "rank 2"));
  // Logged once for the five, not five times.
  std::size_t lines = 0;
  for (std::size_t at = log.find("wrong job token"); at != std::string::npos; at = log.find("wrong job token", at + 1))
    ++lines;
  EXPECT_EQ(lines, 1u) << log;
  // The store's notes say who was turned away, as a claim, for a rank that waits in vain.
  const std::string notes = bystander->diagnose();
  EXPECT_NE(notes.find("rejected 5 connection(s) with a wrong job token"), std::string::npos) << notes;
  EXPECT_NE(notes.find("claiming to be 'rank 3'"), std::string::npos) << notes;
}

// A hello's identity is text from anyone: newlines and escape sequences could forge log lines
// (a '#wrong 0' result row) or clear the terminal. They reach the log and the notes as \xNN.
TEST(StoreFailure, IdentityTextIsMadePrintableBeforeItIsLogged) {
  auto server = start_server();
  ASSERT_TRUE(server);
  auto rank0 = connect_ok(*server, "rank 0");
  ASSERT_TRUE(rank0);
  testing::internal::CaptureStderr();
  std::unique_ptr<Store> intruder;
  const std::string forged = "rank 1\n  sparcoll block_sparse shm 0 4 #wrong 0\x1b[2J\x1b[H";
  EXPECT_EQ(Store::connect(address_of(*server), "wrong", forged, 2000, &intruder).code(), ErrorCode::auth_failure);
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_EQ(log.find('\x1b'), std::string::npos) << log;
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << log;  // one line, ending in its own newline
  EXPECT_NE(log.find("rank 1\\x0a  sparcoll block_sparse"), std::string::npos) << log;
  EXPECT_NE(log.find("\\x1b[2J"), std::string::npos) << log;
  const std::string notes = rank0->diagnose();
  EXPECT_EQ(notes.find('\n'), std::string::npos) << notes;
  EXPECT_EQ(notes.find('\x1b'), std::string::npos) << notes;
}

// A connection that never says hello (or trickles it a byte at a time) is closed after the
// hello timeout; it no longer holds a connection and its buffer for as long as it likes.
TEST(StoreFailure, ConnectionsWithoutAHelloAreClosedAfterTheHelloTimeout) {
  StoreLimits limits;
  limits.hello_timeout = milliseconds(300);
  auto server = start_server(limits);
  ASSERT_TRUE(server);
  testing::internal::CaptureStderr();
  RawSocket silent(server->port());
  RawSocket trickle(server->port());
  ASSERT_TRUE(silent.connected() && trickle.connected());
  const std::string hello = [] {
    wire::Hello h;
    h.token = kToken;
    h.identity = "slow";
    return wire::encode(h);
  }();
  const auto start = Clock::now();
  trickle.send(hello.substr(0, 3));  // 3 of the frame's bytes, then nothing
  EXPECT_TRUE(silent.closed_by_peer_within(3000));
  EXPECT_TRUE(trickle.closed_by_peer_within(3000));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("no hello within 300 ms"), std::string::npos) << log;
  EXPECT_TRUE(connect_ok(*server, "rank 0"));
}

// A flood of connections that never finish their hello: at most max_unauthenticated stay open
// (the oldest are closed first), and a real client still gets in at once.
TEST(StoreFailure, AFloodOfHalfHellosIsCappedAndRealClientsStillJoin) {
  StoreLimits limits;
  limits.max_unauthenticated = 16;
  auto server = start_server(limits);
  ASSERT_TRUE(server);
  testing::internal::CaptureStderr();
  std::vector<std::unique_ptr<RawSocket>> flood;
  for (int i = 0; i < 200; ++i) {
    flood.push_back(std::make_unique<RawSocket>(server->port()));
    ASSERT_TRUE(flood.back()->connected());
    flood.back()->send(frame_with_length(200) + "half");
  }
  auto rank0 = connect_ok(*server, "rank 0");
  ASSERT_TRUE(rank0);
  ASSERT_TRUE(rank0->set("k", "v").ok());
  int closed = 0;
  for (auto& socket : flood) closed += socket->closed_by_peer_within(20) ? 1 : 0;
  const std::string log = testing::internal::GetCapturedStderr();
  // 200 half hellos and one real hello: all but the 16 newest unauthenticated were closed.
  EXPECT_GE(closed, 200 - 16) << log;
  EXPECT_NE(log.find("too many connections have not said hello"), std::string::npos) << log;
  std::size_t lines = 0;
  for (std::size_t at = log.find("said hello"); at != std::string::npos; at = log.find("said hello", at + 1)) ++lines;
  EXPECT_EQ(lines, 1u) << log;
}

// At the descriptor limit, accept fails at once for every pending connection: the server once
// retried in a loop, logging millions of lines at full speed. It must pause and stay quiet.
TEST(StoreFailure, AtTheDescriptorLimitTheServerPausesInsteadOfSpinning) {
  int report[2];
  ASSERT_EQ(::pipe(report), 0);
  int err_pipe[2];
  ASSERT_EQ(::pipe(err_pipe), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // A server in a process that has used up its descriptors (a training process at its
    // limit): every accept fails with EMFILE and no stranger's connection can be closed for one.
    ::dup2(err_pipe[1], STDERR_FILENO);
    rlimit limit{};
    ::getrlimit(RLIMIT_NOFILE, &limit);
    limit.rlim_cur = std::min<rlim_t>(limit.rlim_cur, 1024);
    ::setrlimit(RLIMIT_NOFILE, &limit);
    std::unique_ptr<StoreServer> server;
    if (!StoreServer::start("127.0.0.1:0", kToken, &server).ok()) ::_exit(2);
    const std::uint16_t port = server->port();
    while (::open("/dev/null", O_RDONLY) >= 0) {
    }
    [[maybe_unused]] auto n = ::write(report[1], &port, sizeof port);
    std::this_thread::sleep_for(std::chrono::seconds(2));
    ::_exit(0);
  }
  // The parent keeps no write end: a child that dies before it reports (its server did not
  // start, or ThreadSanitizer ended it for starting a thread after fork) gives end of file here
  // and fails the test, instead of a read that waits forever.
  ::close(report[1]);
  ::close(err_pipe[1]);
  std::uint16_t port = 0;
  ASSERT_EQ(::read(report[0], &port, sizeof port), static_cast<ssize_t>(sizeof port))
      << "the child died before it reported its server's port";
  std::vector<std::unique_ptr<RawSocket>> flood;
  for (int i = 0; i < 100; ++i) flood.push_back(std::make_unique<RawSocket>(port));
  std::string log;
  char buf[4096];
  ssize_t got = 0;
  while ((got = ::read(err_pipe[0], buf, sizeof buf)) > 0) log.append(buf, static_cast<std::size_t>(got));
  int status = 0;
  rusage usage{};
  ASSERT_EQ(::wait4(child, &status, 0, &usage), child);
  ::close(report[0]);
  ::close(err_pipe[0]);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  std::size_t lines = 0;
  for (std::size_t at = log.find("accept failed"); at != std::string::npos; at = log.find("accept failed", at + 1))
    ++lines;
  EXPECT_GE(lines, 1u) << log;
  EXPECT_LE(lines, 1u) << log.substr(0, 2000);
  const double cpu = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                     static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  // Two seconds of a paused server cost next to nothing; spinning on accept cost a whole core.
  EXPECT_LT(cpu, 0.5) << "the store server spent " << cpu << " s of cpu at the descriptor limit";
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
  // Garbage before a hello is logged once per interval (the first: the 4 GiB frame); what an
  // authenticated client does wrong always is.
  EXPECT_NE(log.find("exceeds the"), std::string::npos) << log;
  EXPECT_EQ(log.find("bad magic"), std::string::npos) << log;
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
