// What a stranger on the network can and cannot do to a job (docs/security.md), with real
// processes: the job's own programs on one side, raw sockets on the other.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "../control/store_test_util.hpp"
#include "launch_util.hpp"

namespace {

using sparcoll::control::test::unused_port;
using sparcoll::testing::build_path;
using sparcoll::testing::LaunchResult;
using sparcoll::testing::Launcher;

// An IPv4 address of this host other than loopback, or "" when it has none.
std::string non_loopback_ipv4() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string found;
  for (ifaddrs* a = list; a != nullptr && found.empty(); a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    if ((ntohl(in->sin_addr.s_addr) >> 24) == 127) continue;
    char text[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
    found = text;
  }
  freeifaddrs(list);
  return found;
}

bool accepts_connections(const std::string& ip, std::uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  inet_pton(AF_INET, ip.c_str(), &to.sin_addr);
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0;
  close(fd);
  return ok;
}

// Without a token (ranks started by hand, by mpirun or srun), nothing authenticates a stranger:
// rank 0 says so loudly, and its store listens only on the address the job was given (it used
// to listen on every interface).
TEST(Security, WithoutATokenRank0WarnsAndListensOnlyOnTheJobsAddress) {
  const std::uint16_t port = unused_port();
  const std::string address = "127.0.0.1:" + std::to_string(port);
  const std::string program = build_path("tests/install/sparcoll-init-check");
  const std::vector<std::string> no_token = {"SPARCOLL_JOB_TOKEN="};
  Launcher rank0({program, "0", "2", address, "tcp"}, no_token, std::chrono::seconds(60), true);
  // Rank 0 waits for rank 1 in the rendezvous: its store is up.
  bool up = false;
  for (int i = 0; i < 200 && !up; ++i) {
    up = accepts_connections("127.0.0.1", port);
    if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(up) << "rank 0's store never came up on " << address;
  const std::string other = non_loopback_ipv4();
  if (!other.empty()) EXPECT_FALSE(accepts_connections(other, port)) << "the store is reachable on " << other;
  Launcher rank1({program, "1", "2", address, "tcp"}, no_token, std::chrono::seconds(60), true);
  const LaunchResult r1 = rank1.finish();
  const LaunchResult r0 = rank0.finish();
  EXPECT_EQ(r0.exit_code, 0) << r0.out << r0.err;
  EXPECT_EQ(r1.exit_code, 0) << r1.out << r1.err;
  EXPECT_NE(r0.err.find("unauthenticated job: SPARCOLL_JOB_TOKEN is empty"), std::string::npos) << r0.err;
  EXPECT_NE(r0.err.find("any user of this host"), std::string::npos) << r0.err;
  EXPECT_EQ(r1.err.find("unauthenticated"), std::string::npos) << "only the store's host warns: " << r1.err;
}

}  // namespace
