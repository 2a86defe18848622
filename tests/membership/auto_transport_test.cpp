// SPARCOLL_TRANSPORT=auto (src/membership/auto_transport.hpp): shm on one host; across hosts the
// most preferred transport the registry lets auto choose that every process published; tcp when
// none is common. The choice is a function of the exchanged lists, so every process reaches it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "membership/auto_transport.hpp"
#include "transport/driver_descriptor.hpp"

namespace sparcoll::membership {
namespace {

std::vector<transport::ProcessInfo> on_hosts(const std::vector<std::string>& hosts) {
  std::vector<transport::ProcessInfo> out;
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    transport::ProcessInfo p;
    p.index = static_cast<std::uint32_t>(i);
    p.host = hosts[i];
    out.push_back(p);
  }
  return out;
}

bool built(const char* name) { return transport::find_driver(name) != nullptr; }

TEST(AutoTransport, OneHostIsShmWhateverTheProcessesCanRun) {
  std::string why;
  EXPECT_EQ(choose_auto_transport(on_hosts({"a", "a", "a"}), {"rdma,tcp", "rdma,tcp", "rdma,tcp"}, &why), "shm");
  EXPECT_NE(why.find("one host"), std::string::npos) << why;
}

TEST(AutoTransport, AcrossHostsTheMostPreferredTransportEveryProcessCanRun) {
  if (!built("rdma")) GTEST_SKIP() << "rdma is not built";
  std::string why;
  EXPECT_EQ(choose_auto_transport(on_hosts({"a", "b"}), {"rdma,tcp", "rdma,tcp"}, &why), "rdma");
  EXPECT_EQ(choose_auto_transport(on_hosts({"a", "b", "b"}), {"rdma,tcp", "tcp", "rdma,tcp"}, &why), "tcp")
      << "one process without a usable rdma device keeps the job on tcp";
}

TEST(AutoTransport, ATransportAutoMayNotChooseIsNeverChosenEvenIfListed) {
  std::string why;
  // dpdk needs its own settings and shm serves one host: neither is auto's across hosts.
  EXPECT_EQ(choose_auto_transport(on_hosts({"a", "b"}), {"dpdk,shm,tcp", "dpdk,shm,tcp"}, &why), "tcp");
}

TEST(AutoTransport, NothingInCommonFallsBackToTcp) {
  std::string why;
  EXPECT_EQ(choose_auto_transport(on_hosts({"a", "b"}), {"", "garbage,,x"}, &why), "tcp");
  EXPECT_NE(why.find("no transport"), std::string::npos) << why;
}

TEST(AutoTransport, ThisProcessListsOnlyWhatAutoMayChooseAndCanRunHereByPreference) {
  const std::string here = auto_candidates_here();
  EXPECT_NE(here.find("tcp"), std::string::npos) << here;  // tcp runs everywhere
  EXPECT_EQ(here.find("shm"), std::string::npos) << here;
  EXPECT_EQ(here.find("dpdk"), std::string::npos) << here;
  std::string reason;
  const bool rdma_here = built("rdma") && transport::driver_usable("rdma", &reason);
  EXPECT_EQ(here, rdma_here ? "rdma,tcp" : "tcp");
}

}  // namespace
}  // namespace sparcoll::membership
