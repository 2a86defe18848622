// Failure handling every driver must meet, over every driver: a peer that shuts its driver
// down or is SIGKILLed is reported as peer_failure naming it (after its last messages), and
// setup with a missing peer times out naming it.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "driver_cluster.hpp"

extern char** environ;

namespace sparcoll::test {
namespace {

using transport::Channel;
using transport::ReceivedMessage;
using transport::SendResult;
using Clock = std::chrono::steady_clock;

class DriverFailure : public ::testing::TestWithParam<std::string> {
 protected:
  // A driver that is built but cannot run here (rdma without a device) is skipped, saying why.
  void SetUp() override {
    std::string reason;
    if (!transport::driver_usable(GetParam(), &reason)) GTEST_SKIP() << GetParam() << " is not usable here: " << reason;
  }
  ClusterConfig config(std::uint32_t processes, std::uint32_t channels) {
    ClusterConfig c;
    c.driver = GetParam();
    c.processes = processes;
    c.channels = channels;
    return c;
  }
};

// Polls until the channel reports an error or `limit` passes; counts messages meanwhile.
struct PollOutcome {
  int messages = 0;
  bool failed = false;
  Clock::duration took{};
};
PollOutcome poll_until_error(Channel& channel, Clock::duration limit) {
  PollOutcome outcome;
  const auto start = Clock::now();
  while (Clock::now() - start < limit) {
    ReceivedMessage got[8];
    const int k = channel.poll(got, 8);
    if (k < 0) {
      outcome.failed = true;
      break;
    }
    outcome.messages += k;
    if (k == 0) std::this_thread::yield();
  }
  outcome.took = Clock::now() - start;
  return outcome;
}

TEST_P(DriverFailure, DestroyedPeerIsNamedAfterItsLastMessages) {
  DriverCluster cluster(config(3, 2));
  Status started = cluster.start();
  ASSERT_TRUE(started.ok()) << started.to_string();
  // Rank 2 says goodbye to everyone on channel 0, makes sure it left, and shuts down.
  std::uint64_t goodbye = 42;
  struct iovec iov = {&goodbye, sizeof goodbye};
  Channel& leaving = cluster.driver(2).channel(0);
  ASSERT_EQ(leaving.send(0, &iov, 1), SendResult::ok);
  ASSERT_EQ(leaving.send(1, &iov, 1), SendResult::ok);
  const auto give_up = Clock::now() + std::chrono::seconds(10);
  // A transport that recovers losses (dpdk) knows its frames arrived once the receivers
  // acknowledge them, which they do while they poll: keep them polling, taking nothing yet.
  while (!leaving.flushed() && Clock::now() < give_up) {
    for (std::uint32_t survivor = 0; survivor < 2; ++survivor) (void)cluster.driver(survivor).channel(0).poll(nullptr, 0);
    std::this_thread::yield();
  }
  EXPECT_TRUE(leaving.flushed());
  cluster.destroy(2);

  for (std::uint32_t survivor = 0; survivor < 2; ++survivor) {
    for (std::uint32_t c = 0; c < 2; ++c) {
      Channel& channel = cluster.driver(survivor).channel(c);
      const PollOutcome outcome = poll_until_error(channel, std::chrono::seconds(5));
      ASSERT_TRUE(outcome.failed) << "rank " << survivor << " channel " << c << " did not notice rank 2 leaving";
      EXPECT_EQ(outcome.messages, c == 0 ? 1 : 0) << "the goodbye must arrive before the failure";
      EXPECT_EQ(channel.error().code(), ErrorCode::peer_failure) << channel.error().to_string();
      EXPECT_NE(channel.error().message().find("rank 2"), std::string::npos) << channel.error().message();
      EXPECT_EQ(channel.poll(nullptr, 0), -1) << "the failure is sticky";
      EXPECT_EQ(channel.send(2, &iov, 1), SendResult::error);
    }
  }
}

// dpdk's EAL starts once per process, and a forked copy of a process that runs it cannot use
// it: that driver's child is a fresh process (sparcoll-driver-peer) doing what the forked child
// below does.
bool child_must_exec(const std::string& driver) { return driver == "dpdk"; }

pid_t spawn_driver_peer(DriverCluster& cluster, std::uint32_t index, int report_fd) {
  const ClusterConfig& c = cluster.config();
  std::vector<std::string> args = {std::string(SPARCOLL_BUILD_DIR) + "/tests/drivers/sparcoll-driver-peer",
                                   c.driver,
                                   cluster.store_address(),
                                   cluster.key_prefix(),
                                   std::to_string(index),
                                   std::to_string(c.processes),
                                   std::to_string(c.channels),
                                   std::to_string(c.max_message),
                                   std::to_string(c.deadline_ms)};
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, report_fd, STDOUT_FILENO);
  pid_t child = -1;
  const int rc = posix_spawn(&child, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? child : -1;
}

TEST_P(DriverFailure, KilledProcessIsReportedWithinTwoSeconds) {
  DriverCluster cluster(config(2, 1));
  ASSERT_TRUE(cluster.start_store().ok());
  int ready[2];
  ASSERT_EQ(pipe2(ready, O_CLOEXEC), 0);
  const pid_t parent = getpid();
  const pid_t child = child_must_exec(GetParam()) ? spawn_driver_peer(cluster, 1, ready[1]) : fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child is rank 1: it creates its driver, says so, and waits to be killed.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(2);
    close(ready[0]);
    cluster.set_pid(1, getpid());
    transport::DriverContext ctx;
    std::unique_ptr<transport::Driver> driver;
    Status status = cluster.context(1, &ctx);
    if (status.ok()) status = transport::create_driver(GetParam(), ctx, &driver);
    const char byte = status.ok() ? 'k' : 'e';
    [[maybe_unused]] ssize_t written = write(ready[1], &byte, 1);
    for (;;) pause();
  }
  close(ready[1]);
  cluster.set_pid(1, child);
  const std::vector<Status> created = cluster.create({0});
  char byte = 0;
  struct pollfd wait_ready = {ready[0], POLLIN, 0};
  const bool child_ready = ::poll(&wait_ready, 1, 10000) == 1 && read(ready[0], &byte, 1) == 1 && byte == 'k';
  close(ready[0]);
  kill(child, SIGKILL);
  const auto killed_at = Clock::now();
  int wait_status = 0;
  ASSERT_EQ(waitpid(child, &wait_status, 0), child);
  ASSERT_TRUE(created[0].ok()) << created[0].to_string();
  ASSERT_TRUE(child_ready) << "the child could not create its driver";

  Channel& channel = cluster.driver(0).channel(0);
  const PollOutcome outcome = poll_until_error(channel, std::chrono::seconds(5));
  const auto detected_after = Clock::now() - killed_at;
  ASSERT_TRUE(outcome.failed) << "the SIGKILLed peer was never reported";
  EXPECT_LT(detected_after, std::chrono::seconds(2));
  EXPECT_EQ(channel.error().code(), ErrorCode::peer_failure) << channel.error().to_string();
  EXPECT_NE(channel.error().message().find("rank 1"), std::string::npos) << channel.error().message();
}

TEST_P(DriverFailure, MissingPeerTimesOutNamingIt) {
  ClusterConfig c = config(3, 1);
  c.deadline_ms = 400;
  DriverCluster cluster(c);
  ASSERT_TRUE(cluster.start_store().ok());
  const auto start = Clock::now();
  const std::vector<Status> results = cluster.create({0, 1});  // rank 2 never shows up
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(3));
  for (const Status& status : results) {
    EXPECT_EQ(status.code(), ErrorCode::timeout) << status.to_string();
    EXPECT_NE(status.message().find("rank 2"), std::string::npos) << status.message();
  }
}

// A peer that publishes nonsense where its address belongs (a bug, a version skew, someone who
// reached the store) fails setup at once with an error naming it, not a timeout or a crash: the
// test plays rank 1 through the setup exchange and publishes what each driver's rank 0 reads
// first.
TEST_P(DriverFailure, MalformedPeerAddressIsNamed) {
  ClusterConfig c = config(2, 1);
  c.deadline_ms = 5000;
  DriverCluster cluster(c);
  ASSERT_TRUE(cluster.start_store().ok());
  std::unique_ptr<control::Store> store;
  ASSERT_TRUE(control::Store::connect(cluster.store_address(), kTestJobToken, "rank 1", 5000, &store).ok());
  membership::StoreExchange rank1(*store, cluster.key_prefix(), GetParam(), 1);
  const std::string nonsense = "\x01not an address\n:99999";
  Status published;
  if (GetParam() == "tcp") published = rank1.publish("address", nonsense);
  if (GetParam() == "shm") published = rank1.publish("segment", "/sparcoll-not-its-segment" + nonsense);
  if (GetParam() == "dpdk") published = rank1.publish("addr", nonsense);
  if (GetParam() == "rdma") published = rank1.publish_to(0, "qp", nonsense);
  ASSERT_TRUE(published.ok()) << published.to_string();
  const auto start = Clock::now();
  const Status status = cluster.create({0})[0];
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(4)) << "it waited for its deadline";
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.code(), ErrorCode::timeout) << status.to_string();
  EXPECT_NE(status.message().find("rank 1"), std::string::npos) << status.to_string();
  // The peer's bytes are quoted printable: a log line is not the peer's to shape.
  EXPECT_TRUE(std::all_of(status.message().begin(), status.message().end(),
                          [](char ch) { return static_cast<unsigned char>(ch) >= 0x20; }))
      << status.to_string();
  std::printf("%s: %s\n", GetParam().c_str(), status.to_string().c_str());
}

INSTANTIATE_TEST_SUITE_P(Drivers, DriverFailure, ::testing::ValuesIn(transport::available_drivers()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace sparcoll::test
