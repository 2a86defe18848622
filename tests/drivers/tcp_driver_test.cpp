// tcp-only behaviour: the job token check, hostile raw sockets during setup, oversized frames,
// the send queue.
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../../drivers/tcp/tcp_channel.hpp"
#include "../../drivers/tcp/tcp_send_queue.hpp"
#include "../../drivers/tcp/tcp_wire.hpp"
#include "driver_cluster.hpp"

namespace sparcoll::test {
namespace {

using transport::ReceivedMessage;
using Clock = std::chrono::steady_clock;

ClusterConfig tcp_config() {
  ClusterConfig c;
  c.driver = "tcp";
  c.processes = 2;
  c.channels = 1;
  c.deadline_ms = 5000;
  return c;
}

// Connects a raw socket to the listener rank 1 published.
int connect_to_rank1(DriverCluster& cluster) {
  std::unique_ptr<control::Store> store;
  if (!control::Store::connect(cluster.store_address(), kTestJobToken, "test", 5000, &store).ok()) return -1;
  std::string address;
  if (!store->get(membership::StoreExchange::key(cluster.key_prefix(), "tcp", "address", 1), 5000, &address).ok()) return -1;
  const std::size_t colon = address.rfind(':');
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<std::uint16_t>(std::stoi(address.substr(colon + 1))));
  inet_pton(AF_INET, address.substr(0, colon).c_str(), &to.sin_addr);
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// True once the far end has closed `fd` (EOF or reset) within 5 s.
bool closed_by_peer(int fd) {
  struct pollfd p = {fd, POLLIN, 0};
  char buffer[64];
  while (::poll(&p, 1, 5000) == 1) {
    const ssize_t n = recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) return true;  // a reject answer may come first: keep reading
  }
  return false;
}

// The process's connected TCP sockets (SOCK_STREAM with a peer), from /proc/self/fd.
std::vector<int> connected_tcp_sockets() {
  std::vector<int> fds;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return fds;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    const int fd = std::stoi(entry->d_name);
    int type = 0;
    socklen_t len = sizeof type;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) continue;
    sockaddr_storage peer{};
    socklen_t peer_len = sizeof peer;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) continue;
    if (peer.ss_family != AF_INET && peer.ss_family != AF_INET6) continue;
    fds.push_back(fd);
  }
  closedir(dir);
  return fds;
}

// Nagle on either end of a connection delays a small message until the far end's delayed ack
// (~40 ms on Linux): a block-sparse allreduce over tcp took 45 ms instead of 5. Both the
// connecting and the accepting side must turn it off (an accepted socket inherits the
// listener's options, and the listener had none).
TEST(DriverTcp, EveryConnectionHasNagleOff) {
  const std::vector<int> before = connected_tcp_sockets();
  ClusterConfig config = tcp_config();
  config.processes = 3;
  config.channels = 2;
  DriverCluster cluster(config);
  Status started = cluster.start();
  ASSERT_TRUE(started.ok()) << started.to_string();
  int checked = 0;
  for (const int fd : connected_tcp_sockets()) {
    if (std::find(before.begin(), before.end(), fd) != before.end()) continue;
    int nodelay = 0;
    socklen_t len = sizeof nodelay;
    if (getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &nodelay, &len) != 0) continue;  // not TCP (e.g. a unix pair)
    EXPECT_NE(nodelay, 0) << "fd " << fd << " has Nagle on";
    ++checked;
  }
  // 3 pairs x 2 channels, both ends in this process, plus each rank's store connection.
  EXPECT_GE(checked, 12);
}

// The data connections a cluster started since `before` was taken: connected TCP sockets that
// are not the store's (neither end on the store's port).
std::vector<int> data_connections(const std::vector<int>& before, const DriverCluster& cluster) {
  const std::string store = cluster.store_address();
  const auto store_port = static_cast<std::uint16_t>(std::stoi(store.substr(store.rfind(':') + 1)));
  std::vector<int> out;
  for (const int fd : connected_tcp_sockets()) {
    if (std::find(before.begin(), before.end(), fd) != before.end()) continue;
    sockaddr_in mine{}, theirs{};
    socklen_t mine_len = sizeof mine, theirs_len = sizeof theirs;
    getsockname(fd, reinterpret_cast<sockaddr*>(&mine), &mine_len);
    getpeername(fd, reinterpret_cast<sockaddr*>(&theirs), &theirs_len);
    if (ntohs(mine.sin_port) == store_port || ntohs(theirs.sin_port) == store_port) continue;
    out.push_back(fd);
  }
  return out;
}

std::string congestion_of(int fd) {
  char name[16] = {};
  socklen_t len = sizeof name;
  if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len) != 0) return "(getsockopt failed)";
  return std::string(name, strnlen(name, sizeof name));
}

std::string system_congestion() {
  std::string name;
  FILE* f = fopen("/proc/sys/net/ipv4/tcp_congestion_control", "r");
  if (f == nullptr) return name;
  char line[64] = {};
  if (fgets(line, sizeof line, f) != nullptr) name = line;
  fclose(f);
  while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
  return name;
}

// Starts a 3-process, 2-channel cluster with `setting` and returns each data connection's
// congestion control ("" entries never: the test fails first).
std::vector<std::string> congestion_after_setup(const std::string& setting, bool other_hosts, Status* started) {
  const std::vector<int> before = connected_tcp_sockets();
  ClusterConfig config = tcp_config();
  config.processes = 3;
  config.channels = 2;
  DriverCluster cluster(config);
  for (std::uint32_t i = 0; i < config.processes; ++i) {
    cluster.options(i).tcp_congestion = setting;
    if (other_hosts) cluster.set_host(i, "host-" + std::to_string(i));
  }
  *started = cluster.start();
  std::vector<std::string> names;
  if (!started->ok()) return names;
  for (const int fd : data_connections(before, cluster)) names.push_back(congestion_of(fd));
  return names;
}

// bbr paces each connection at its bandwidth estimate from a timer (loopback has no fq qdisc):
// a 1 MiB allreduce between two processes of this host took 0.5 ms instead of 0.3. Under auto,
// connections between processes of one host never pace.
TEST(DriverTcp, ConnectionsWithinTheHostNeverUseAPacingCongestionControl) {
  Status started;
  const std::vector<std::string> names = congestion_after_setup("auto", false, &started);
  ASSERT_TRUE(started.ok()) << started.to_string();
  EXPECT_EQ(names.size(), 12u);  // 3 pairs x 2 channels, both ends in this process
  const std::string system = system_congestion();
  for (const std::string& name : names) {
    EXPECT_NE(name.rfind("bbr", 0), 0u) << "a same-host connection uses " << name;
    if (system.rfind("bbr", 0) != 0) {
      EXPECT_EQ(name, system) << "auto changed a non-pacing " << system;
    }
  }
}

TEST(DriverTcp, ConnectionsToOtherHostsKeepTheSystemsCongestionControl) {
  Status started;
  const std::vector<std::string> names = congestion_after_setup("auto", true, &started);
  ASSERT_TRUE(started.ok()) << started.to_string();
  EXPECT_EQ(names.size(), 12u);
  for (const std::string& name : names) EXPECT_EQ(name, system_congestion());
}

TEST(DriverTcp, ANamedCongestionControlIsUsedByEveryConnection) {
  Status started;
  const std::vector<std::string> names = congestion_after_setup("reno", true, &started);  // reno: always allowed
  ASSERT_TRUE(started.ok()) << started.to_string();
  EXPECT_EQ(names.size(), 12u);
  for (const std::string& name : names) EXPECT_EQ(name, "reno");
}

TEST(DriverTcp, ACongestionControlTheKernelRefusesIsAClearSetupError) {
  Status started;
  congestion_after_setup("nosuchalgo", false, &started);
  ASSERT_FALSE(started.ok());
  EXPECT_EQ(started.code(), ErrorCode::invalid_argument);
  EXPECT_NE(started.message().find("SPARCOLL_TCP_CONGESTION=nosuchalgo: the kernel refused it for the listener"),
            std::string::npos) << started.message();
  EXPECT_NE(started.message().find("net.ipv4.tcp_available_congestion_control"), std::string::npos) << started.message();
}

// A wrong token at a data port is a stranger (or a process of another job): the listener
// closes that connection, tells it why and carries on, so one packet cannot end a job's setup.
// The side that connected hears the rejection and fails at once; the listener, still waiting
// for its peer, says in its timeout which connection presented a wrong token.
TEST(DriverTcp, WrongJobTokenClosesThatConnectionAndTheTimeoutSaysWhy) {
  ClusterConfig config = tcp_config();
  config.deadline_ms = 1500;
  DriverCluster cluster(config);
  cluster.options(1).job_token = "some-other-job";
  ASSERT_TRUE(cluster.start_store().ok());
  const std::vector<Status> results = cluster.create();
  // Rank 0 connects to rank 1 with the job's token, which rank 1 (holding another) rejects.
  EXPECT_EQ(results[0].code(), ErrorCode::auth_failure) << results[0].to_string();
  EXPECT_NE(results[0].message().find("rank 1"), std::string::npos) << results[0].message();
  EXPECT_NE(results[0].message().find("job token"), std::string::npos) << results[0].message();
  EXPECT_EQ(results[1].code(), ErrorCode::timeout) << results[1].to_string();
  EXPECT_NE(results[1].message().find("claiming to be rank 0 on channel 0 presented a wrong job token"),
            std::string::npos)
      << results[1].message();
}

// Strangers at the listener during setup: a flood of connections that never say hello, and a
// wrong-token hello. The real peer still connects and setup succeeds.
TEST(DriverTcp, StrangersAtTheListenerDoNotStopSetup) {
  DriverCluster cluster(tcp_config());
  ASSERT_TRUE(cluster.start_store().ok());
  std::vector<Status> rank1;
  std::thread acceptor([&] { rank1 = cluster.create({1}); });
  std::vector<int> flood;
  for (int i = 0; i < 100; ++i) {
    const int fd = connect_to_rank1(cluster);
    ASSERT_GE(fd, 0);
    flood.push_back(fd);
  }
  const int intruder = connect_to_rank1(cluster);
  ASSERT_GE(intruder, 0);
  transport::tcp::HandshakeHeader hello;
  hello.process = 0;
  const std::string bytes = transport::tcp::encode_handshake(hello, "not-the-token");
  ASSERT_EQ(send(intruder, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  EXPECT_TRUE(closed_by_peer(intruder));
  const std::vector<Status> rank0 = cluster.create({0});
  acceptor.join();
  EXPECT_TRUE(rank0[0].ok()) << rank0[0].to_string();
  EXPECT_TRUE(rank1[0].ok()) << rank1[0].to_string();
  // When setup ends, no stranger's connection is left open (the listener's state goes with it).
  int closed = 0;
  for (const int fd : flood) closed += closed_by_peer(fd) ? 1 : 0;
  EXPECT_EQ(closed, 100);
  for (const int fd : flood) close(fd);
  close(intruder);
}

TEST(DriverTcp, GarbageHellosAreDroppedAndSetupCarriesOn) {
  DriverCluster cluster(tcp_config());
  ASSERT_TRUE(cluster.start_store().ok());
  std::vector<Status> rank1;
  std::thread acceptor([&] { rank1 = cluster.create({1}); });

  const int garbage = connect_to_rank1(cluster);
  ASSERT_GE(garbage, 0);
  const char noise[64] = "GET / HTTP/1.1\r\nHost: sparcoll\r\n\r\n";
  ASSERT_EQ(send(garbage, noise, sizeof noise, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof noise));
  // A well-formed hello with the right token, claiming to be rank 1 itself: not expected.
  const int impostor = connect_to_rank1(cluster);
  ASSERT_GE(impostor, 0);
  transport::tcp::HandshakeHeader hello;
  hello.process = 1;
  const std::string bytes = transport::tcp::encode_handshake(hello, kTestJobToken);
  ASSERT_EQ(send(impostor, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  // And one that connects and says nothing at all.
  const int silent = connect_to_rank1(cluster);
  ASSERT_GE(silent, 0);
  EXPECT_TRUE(closed_by_peer(garbage));
  EXPECT_TRUE(closed_by_peer(impostor));

  const std::vector<Status> rank0 = cluster.create({0});
  acceptor.join();
  ASSERT_TRUE(rank0[0].ok()) << rank0[0].to_string();
  ASSERT_TRUE(rank1[0].ok()) << rank1[0].to_string();
  close(garbage);
  close(impostor);
  close(silent);

  std::uint32_t word = 7;
  struct iovec iov = {&word, sizeof word};
  ASSERT_EQ(cluster.driver(0).channel(0).send(1, &iov, 1), transport::SendResult::ok);
  int got_count = 0;
  const auto give_up = Clock::now() + std::chrono::seconds(5);
  while (got_count == 0 && Clock::now() < give_up) {
    ReceivedMessage got[2];
    ASSERT_GE(cluster.driver(0).channel(0).poll(got, 2), 0);
    got_count = cluster.driver(1).channel(0).poll(got, 2);
    ASSERT_GE(got_count, 0);
    if (got_count == 1) {
      EXPECT_EQ(std::memcmp(got[0].data, &word, sizeof word), 0);
    }
    std::this_thread::yield();
  }
  EXPECT_EQ(got_count, 1);
}

TEST(DriverTcp, OversizedFrameIsAProtocolErrorNamingThePeer) {
  DriverCluster cluster(tcp_config());
  ASSERT_TRUE(cluster.start_store().ok());
  std::vector<Status> rank1;
  std::thread acceptor([&] { rank1 = cluster.create({1}); });
  // A raw socket plays rank 0: a correct hello, then a frame above max_message.
  const int fd = connect_to_rank1(cluster);
  ASSERT_GE(fd, 0);
  transport::tcp::HandshakeHeader hello;
  hello.process = 0;
  const std::string bytes = transport::tcp::encode_handshake(hello, kTestJobToken);
  ASSERT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  std::byte answer[transport::tcp::kHandshakeHeaderBytes];
  ASSERT_EQ(recv(fd, answer, sizeof answer, MSG_WAITALL), static_cast<ssize_t>(sizeof answer));
  transport::tcp::HandshakeHeader decoded;
  ASSERT_EQ(transport::tcp::decode_handshake(answer, &decoded), nullptr);
  EXPECT_EQ(decoded.kind, transport::tcp::HandshakeKind::accept);
  acceptor.join();
  ASSERT_TRUE(rank1[0].ok()) << rank1[0].to_string();

  const transport::tcp::FrameHeader frame{4097, 0};
  ASSERT_EQ(send(fd, &frame, sizeof frame, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof frame));
  transport::Channel& channel = cluster.driver(1).channel(0);
  int result = 0;
  const auto give_up = Clock::now() + std::chrono::seconds(5);
  while (result == 0 && Clock::now() < give_up) {
    ReceivedMessage got[2];
    result = channel.poll(got, 2);
    std::this_thread::yield();
  }
  close(fd);
  ASSERT_EQ(result, -1);
  EXPECT_EQ(channel.error().code(), ErrorCode::protocol_error) << channel.error().to_string();
  EXPECT_NE(channel.error().message().find("rank 0"), std::string::npos) << channel.error().message();
  EXPECT_NE(channel.error().message().find("4097"), std::string::npos) << channel.error().message();
}

// Found by tests/fuzz/fuzz_tcp_wire (corpus: crash-frames-before-corrupt-frame): a corrupt
// frame failed the poll that read it, and the good frames before it in the same read, already
// handed out, were lost with it.
TEST(DriverTcp, FramesBeforeACorruptFrameAreDelivered) {
  for (const transport::tcp::FrameHeader bad : {transport::tcp::FrameHeader{0, 1}, transport::tcp::FrameHeader{2000, 0}}) {
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    std::string stream;
    for (const std::string payload : {"first", "second message"}) {
      const transport::tcp::FrameHeader h{static_cast<std::uint32_t>(payload.size()), 0};
      stream.append(reinterpret_cast<const char*>(&h), sizeof h);
      stream += payload;
      stream.resize(stream.size() + (8 - payload.size() % 8) % 8, '\0');
    }
    stream.append(reinterpret_cast<const char*>(&bad), sizeof bad);
    ASSERT_EQ(write(fds[1], stream.data(), stream.size()), static_cast<ssize_t>(stream.size()));
    std::vector<transport::tcp::PeerConnection> peers(1);
    peers[0].index = 1;
    peers[0].label = "rank 1";
    peers[0].fd = fds[0];
    std::unique_ptr<transport::tcp::TcpChannel> channel;
    ASSERT_TRUE(transport::tcp::TcpChannel::create(0, 1024, 2, std::move(peers), &channel).ok());
    ReceivedMessage got[4];
    ASSERT_EQ(channel->poll(got, 4), 2) << channel->error().to_string();
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(got[0].data), got[0].size), "first");
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(got[1].data), got[1].size), "second message");
    EXPECT_EQ(channel->poll(got, 4), -1);
    EXPECT_EQ(channel->error().code(), ErrorCode::protocol_error) << channel->error().to_string();
    EXPECT_NE(channel->error().message().find("rank 1"), std::string::npos) << channel->error().message();
    close(fds[1]);
  }
}

// An empty message's iovec may have a null base (the conformance suite sends one): pushing it
// must copy nothing and not hand the null pointer to memcpy (UBSan in scripts/sanitize).
TEST(DriverTcp, SendQueueTakesAnEmptyPushFromNull) {
  transport::tcp::SendQueue queue(16, 8);
  queue.push(nullptr, 0);
  queue.push_reference(nullptr, 0);
  EXPECT_TRUE(queue.empty());
  const char bytes[12] = {'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 'k', 'l'};
  queue.push(bytes, sizeof bytes);
  queue.consume(10);
  queue.push(nullptr, 0);
  queue.push(bytes, 8);  // wraps around the end of the ring
  struct iovec iov[4];
  ASSERT_EQ(queue.readable(iov, 4), 2);
  EXPECT_EQ(iov[0].iov_len + iov[1].iov_len, 10u);
  EXPECT_TRUE(queue.can_take(6, 1));
  EXPECT_FALSE(queue.can_take(7, 1));
}

// The bytes a queue hands to sendmsg, at most `max` iovecs per call, consumed `step` at a time.
std::string drain(transport::tcp::SendQueue& queue, int max, std::size_t step) {
  std::string out;
  while (!queue.empty()) {
    struct iovec iov[8];
    const int n = queue.readable(iov, max);
    std::string batch;
    for (int i = 0; i < n; ++i) batch.append(static_cast<const char*>(iov[i].iov_base), iov[i].iov_len);
    const std::size_t take = std::min(step, batch.size());
    out += batch.substr(0, take);
    queue.consume(take);
  }
  return out;
}

// Copies and references leave in the order they were queued, whatever the iovec limit and
// however the socket cuts the writes; a reference is read from the caller's memory at write time
// (that is what saves the copy), and the queue holds one until the write passed its last byte.
TEST(DriverTcp, SendQueueKeepsCopiesAndReferencesInOrder) {
  for (int max : {2, 3, 8})
    for (std::size_t step : {1u, 5u, 64u}) {
      transport::tcp::SendQueue queue(16, 8);
      std::string payload = "REFERENCED-PAYLOAD";
      queue.push("head", 4);
      queue.push_reference(payload.data(), payload.size());
      queue.push("pad", 3);
      queue.push("next", 4);  // one copied run with "pad"
      queue.push_reference(payload.data(), 4);
      EXPECT_TRUE(queue.holds_references());
      payload[0] = 'r';  // changed before the write: the write reads the memory as it is then
      EXPECT_EQ(drain(queue, max, step), "headrEFERENCED-PAYLOADpadnextrEFE") << "max " << max << " step " << step;
      EXPECT_FALSE(queue.holds_references());
    }
}

// A copied run that wraps around the ring's end takes two iovecs; with room for one, the rest of
// it comes in the next call.
TEST(DriverTcp, SendQueueSplitsAWrappedRunAcrossCalls) {
  transport::tcp::SendQueue queue(8, 4);
  queue.push("123456", 6);
  queue.consume(6);
  queue.push("abcdef", 6);  // 2 bytes at the end of the ring, 4 at its start
  struct iovec iov[2];
  ASSERT_EQ(queue.readable(iov, 2), 2);
  EXPECT_EQ(iov[0].iov_len, 2u);
  EXPECT_EQ(drain(queue, 2, 1), "abcdef");
}

// A connected pair of tcp channels over a socketpair: `sender` (process 0) and `receiver` (1).
struct ChannelPair {
  std::unique_ptr<transport::tcp::TcpChannel> sender, receiver;
  ChannelPair() {
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return;
    std::vector<transport::tcp::PeerConnection> a(1), b(1);
    a[0] = {1, "rank 1", fds[0]};
    b[0] = {0, "rank 0", fds[1]};
    if (!transport::tcp::TcpChannel::create(0, 65536, 2, std::move(a), &sender).ok()) sender.reset();
    if (!transport::tcp::TcpChannel::create(1, 65536, 2, std::move(b), &receiver).ok()) receiver.reset();
  }
};

// send(…, UserMemory) over tcp queues the caller's memory by reference, without registration:
// far more bytes than the socket and the copy queue hold go out intact and in order, and
// user_memory_released() is false until they have all left.
TEST(DriverTcp, SendsReadTheCallersMemoryInPlaceUntilFlushed) {
  ChannelPair pair;
  ASSERT_TRUE(pair.sender && pair.receiver);
  EXPECT_TRUE(pair.sender->sends_any_memory_in_place());
  constexpr std::size_t kFrames = 128, kPayload = 60000;  // 7.7 MB: above the 2 MiB copy queue
  std::vector<std::uint8_t> data(kFrames * kPayload);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint8_t>(i * 2654435761u >> 13);
  const transport::UserMemory user{reinterpret_cast<const std::byte*>(data.data()), data.size(), 0};
  std::size_t sent = 0, received = 0;
  bool released_before_end = true;
  std::vector<std::uint8_t> got;
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while ((received < kFrames || !pair.sender->flushed()) && Clock::now() < deadline) {
    while (sent < kFrames) {
      std::uint32_t tag = static_cast<std::uint32_t>(sent);
      struct iovec iov[2] = {{&tag, sizeof tag}, {data.data() + sent * kPayload, kPayload}};
      const transport::SendResult r = pair.sender->send(1, iov, 2, user);
      ASSERT_NE(r, transport::SendResult::error) << pair.sender->error().to_string();
      if (r == transport::SendResult::no_resource) break;
      ++sent;
    }
    if (received + 8 < kFrames) released_before_end = released_before_end && pair.sender->user_memory_released();
    ReceivedMessage msgs[16];
    ASSERT_GE(pair.sender->poll(msgs, 16), 0) << pair.sender->error().to_string();
    const int n = pair.receiver->poll(msgs, 16);
    ASSERT_GE(n, 0) << pair.receiver->error().to_string();
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(msgs[i].size, sizeof(std::uint32_t) + kPayload);
      std::uint32_t tag = 0;
      std::memcpy(&tag, msgs[i].data, sizeof tag);
      ASSERT_EQ(tag, received) << "frames out of order";
      const auto* payload = reinterpret_cast<const std::uint8_t*>(msgs[i].data) + sizeof tag;
      got.insert(got.end(), payload, payload + kPayload);
      ++received;
    }
  }
  ASSERT_EQ(received, kFrames);
  EXPECT_TRUE(got == data) << "a frame's payload differs from the caller's memory";
  EXPECT_FALSE(released_before_end) << "frames were queued by reference, so the memory was in use";
  EXPECT_TRUE(pair.sender->user_memory_released());
}

// A collective that fails gives the caller its buffers back at once, while its frames may still
// be queued: stop_reading_user_memory() copies them, and the peer gets the bytes as they were.
TEST(DriverTcp, AFailedCollectiveTakesItsQueuedBytesOutOfTheCallersMemory) {
  ChannelPair pair;
  ASSERT_TRUE(pair.sender && pair.receiver);
  constexpr std::size_t kFrames = 96, kPayload = 60000;
  std::vector<std::uint8_t> data(kFrames * kPayload, 0xab);
  const transport::UserMemory user{reinterpret_cast<const std::byte*>(data.data()), data.size(), 0};
  std::size_t sent = 0;
  for (; sent < kFrames; ++sent) {
    struct iovec iov = {data.data() + sent * kPayload, kPayload};
    if (pair.sender->send(1, &iov, 1, user) != transport::SendResult::ok) break;
  }
  ASSERT_GT(sent, 40u);
  ASSERT_FALSE(pair.sender->user_memory_released());
  pair.sender->stop_reading_user_memory();
  EXPECT_TRUE(pair.sender->user_memory_released());
  std::fill(data.begin(), data.end(), 0);  // the caller reuses its buffer
  std::size_t received = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  ReceivedMessage msgs[16];
  while (received < sent && Clock::now() < deadline) {
    ASSERT_GE(pair.sender->poll(msgs, 16), 0);
    const int n = pair.receiver->poll(msgs, 16);
    ASSERT_GE(n, 0);
    for (int i = 0; i < n; ++i, ++received) {
      ASSERT_EQ(msgs[i].size, kPayload);
      const auto* p = reinterpret_cast<const std::uint8_t*>(msgs[i].data);
      ASSERT_TRUE(std::all_of(p, p + kPayload, [](std::uint8_t b) { return b == 0xab; })) << "frame " << received;
    }
  }
  EXPECT_EQ(received, sent);
  EXPECT_TRUE(pair.sender->flushed());
}

// A peer that is gone never takes its queue: the caller's memory is released (nothing reads it
// afterwards), so a collective that fails on a dead peer does not hold the caller's buffer.
TEST(DriverTcp, ADeadPeerReleasesTheCallersMemory) {
  ChannelPair pair;
  ASSERT_TRUE(pair.sender && pair.receiver);
  std::vector<std::byte> data(8 * 1024 * 1024);
  const transport::UserMemory user{data.data(), data.size(), 0};
  for (std::size_t off = 0; off + 60000 <= data.size(); off += 60000) {
    struct iovec iov = {data.data() + off, 60000};
    if (pair.sender->send(1, &iov, 1, user) != transport::SendResult::ok) break;
  }
  ReceivedMessage msgs[4];
  (void)pair.sender->poll(msgs, 4);
  EXPECT_FALSE(pair.sender->user_memory_released()) << "the socket cannot hold 8 MiB";
  pair.receiver.reset();  // closes its end
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (!pair.sender->user_memory_released() && Clock::now() < deadline) (void)pair.sender->poll(msgs, 4);
  EXPECT_TRUE(pair.sender->user_memory_released());
}

}  // namespace
}  // namespace sparcoll::test
