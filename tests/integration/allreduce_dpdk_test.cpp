// Block-sparse allreduce over the dpdk driver, multi-process:
//   * memif between local ranks (the default under sparcoll-run: no EAL arguments needed);
//   * af_packet on veth pairs in network namespaces, one simulated host per process
//     (scripts/netns-cluster + scripts/netns-run), with random loss on the links;
//   * the deterministic drop hook (SPARCOLL_DPDK_DROP_EVERY) — results stay exact, and the
//     retransmit counters show the recovery did the work;
//   * broadcast, allgather, reduce_scatter, reduce, gather, scatter and barrier (sparcoll-check-collectives) on the
//     collective thread's own channel, over memif and af_packet.
// Skipped with the reason where dpdk cannot run, or (namespaces) without root.
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "launch_util.hpp"
#include "transport/driver.hpp"

namespace {

using sparcoll::testing::build_path;
using sparcoll::testing::launch;
using sparcoll::testing::LaunchResult;
using sparcoll::testing::run_program;
using sparcoll::testing::source_path;

bool dpdk_usable(std::string* reason) { return sparcoll::transport::driver_usable("dpdk", reason); }

const std::vector<std::string> kMatrix = {"--sizes",     "0,1,257,20001", "--dtypes",   "f32,bf16,i32", "--ops", "sum,max",
                                          "--densities", "0,0.01,1",      "--patterns", "random,disjoint"};

class AllreduceDpdk : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string reason;
    if (!dpdk_usable(&reason)) GTEST_SKIP() << "dpdk is not usable here: " << reason;
  }

  LaunchResult run(int ranks, int aggregators, const std::vector<std::string>& args,
                   const std::vector<std::string>& env = {},
                   const std::string& program = "tests/integration/sparcoll-check") {
    std::vector<std::string> argv = {"-n", std::to_string(ranks), "--transport", "dpdk", "--aggregators",
                                     std::to_string(aggregators), "--timeout", "240", "--", build_path(program)};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto r = launch(argv, env, std::chrono::seconds(300));
    EXPECT_EQ(r.exit_code, 0) << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
    EXPECT_NE(r.out.find("cases passed"), std::string::npos) << r.out;
    return r;
  }
};

TEST_F(AllreduceDpdk, TwoRanksOverMemif) { run(2, 0, kMatrix); }
TEST_F(AllreduceDpdk, FourRanksOverMemif) {
  run(4, 0, {"--sizes", "1,257,20001", "--dtypes", "f32,i32", "--ops", "sum", "--densities", "0,0.01,1"});
}
TEST_F(AllreduceDpdk, ThreeRanksTwoDedicatedAggregatorsOverMemif) {
  run(3, 2, {"--sizes", "1,257,20001", "--dtypes", "f32,i32", "--ops", "sum,max", "--densities", "0,0.01,1"});
}
TEST_F(AllreduceDpdk, LargeTensorOverMemif) {
  run(3, 0, {"--sizes", "1000003", "--dtypes", "f32", "--ops", "sum", "--densities", "0.01,1", "--patterns", "random"});
}

// The peer-to-peer collectives run on the driver's last channel (SPARCOLL_THREADS + 1 channels).
const std::vector<std::string> kCollectives = {"--sizes", "0,1,257,20001", "--dtypes", "f32,bf16,i32", "--ops",
                                               "sum,max", "--inflight", "4"};
TEST_F(AllreduceDpdk, CollectivesOverMemif) {
  run(3, 0, kCollectives, {}, "tests/integration/sparcoll-check-collectives");
  run(4, 0, {"--sizes", "1,1283", "--dtypes", "f32", "--ops", "sum", "--large", "300007"}, {},
      "tests/integration/sparcoll-check-collectives");
}
// send and recv (outside collectives) on the same channel, with and without loss.
TEST_F(AllreduceDpdk, SendAndRecvOverMemif) {
  run(3, 0, {}, {}, "tests/integration/sparcoll-check-p2p");
  run(2, 0, {}, {"SPARCOLL_DPDK_DROP_EVERY=7"}, "tests/integration/sparcoll-check-p2p");
}
TEST_F(AllreduceDpdk, CollectivesWithLossAndTwoThreads) {
  run(3, 0, {"--sizes", "1,257,20001", "--dtypes", "f32,i32", "--ops", "sum,min"},
      {"SPARCOLL_DPDK_DROP_EVERY=7", "SPARCOLL_THREADS=2", "SPARCOLL_LANES=4"},
      "tests/integration/sparcoll-check-collectives");
}

// Every 7th data frame of every channel is dropped before it leaves: the sliding window resends
// exactly what was lost (never zeros), and the sums stay exact.
TEST_F(AllreduceDpdk, DropEverySeventhFrameStillExact) {
  const auto r = run(3, 0, {"--sizes", "257,20001,300007", "--dtypes", "f32,i32", "--ops", "sum", "--densities",
                            "0.01,0.1,1", "--traffic"},
                     {"SPARCOLL_DPDK_DROP_EVERY=7"});
  EXPECT_NE(r.out.find(" retransmitted="), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(" retransmitted=0 "), std::string::npos) << "no frame was resent:\n" << r.out;
  // The driver's own counters, by their names (Communicator::transport_counters()).
  EXPECT_NE(r.out.find(" dpdk.retransmitted="), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(" dpdk.retransmitted=0 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" dpdk.dropped_by_hook="), std::string::npos) << r.out;
}

TEST_F(AllreduceDpdk, DropEveryThirdFrameWithDedicatedAggregators) {
  run(2, 1, {"--sizes", "257,20001", "--dtypes", "f32", "--ops", "sum,max", "--densities", "0.01,1"},
      {"SPARCOLL_DPDK_DROP_EVERY=3"});
}

// Registered send buffers go out in place (frames chained to the user's bytes; the channel logs
// its first one at info level), with every 7th data frame dropped so retransmissions read the
// user memory again. sparcoll-check deregisters and frees each send buffer right after wait()
// (the 400 KB ones are unmapped): a frame still reading one would crash or corrupt the results.
TEST_F(AllreduceDpdk, ZeroCopyFromRegisteredBuffersWithDrops) {
  // Named block_sparse: zero-copy is for the block-sparse engine's sends (auto sends these sizes
  // by block recursive doubling or the ring, whose messages are built, not the user's bytes).
  const std::vector<std::string> args = {"--register", "--sizes", "257,100003", "--dtypes", "f32,bf16", "--ops",
                                         "sum",        "--densities", "0.01,1", "--patterns", "random,disjoint",
                                         "--traffic",  "--algo", "block_sparse"};
  const auto r = run(3, 0, args, {"SPARCOLL_LOG_LEVEL=info", "SPARCOLL_DPDK_DROP_EVERY=7"});
  EXPECT_NE(r.err.find("zero-copy sends from registered user memory"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("zero-copy is off"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find(" retransmitted=0 "), std::string::npos) << "no frame was resent:\n" << r.out;
  // Dedicated aggregators: every block crosses the wire.
  run(2, 2, args, {"SPARCOLL_DPDK_DROP_EVERY=7"});
}

// memif zero-copy: each rank process's link to its lowest-index peer is a zero-copy link when it
// is that link's client (SPARCOLL_DPDK_MEMIF_ZERO_COPY=auto, the default); with off every link
// copies. Both give exact sums, with registered (chained) sends and with loss; the log says which.
TEST_F(AllreduceDpdk, MemifZeroCopyLinksAndCopyingLinksBothExact) {
  const std::vector<std::string> args = {"--register", "--sizes", "1,257,100003", "--dtypes", "f32,i32", "--ops",
                                         "sum,max", "--densities", "0,0.01,1", "--patterns", "random,disjoint"};
  const auto zc = run(3, 0, args, {"SPARCOLL_LOG_LEVEL=info", "SPARCOLL_DPDK_DROP_EVERY=5"});
  EXPECT_NE(zc.err.find("memif zero-copy on the link to rank 0"), std::string::npos) << zc.err;
  const auto copying = run(3, 0, args, {"SPARCOLL_LOG_LEVEL=info", "SPARCOLL_DPDK_MEMIF_ZERO_COPY=off"});
  EXPECT_EQ(copying.err.find("memif zero-copy on"), std::string::npos) << copying.err;
  EXPECT_NE(copying.err.find("memif zero-copy off"), std::string::npos) << copying.err;
}

// A value the option does not know is refused before anything starts, naming the variable.
TEST_F(AllreduceDpdk, UnknownMemifZeroCopyValueIsRefused) {
  const auto r = launch({"-n", "2", "--transport", "dpdk", "--timeout", "60", "--", build_path("tests/integration/sparcoll-check"),
                         "--sizes", "1"},
                        {"SPARCOLL_DPDK_MEMIF_ZERO_COPY=yes"}, std::chrono::seconds(120));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE((r.out + r.err).find("SPARCOLL_DPDK_MEMIF_ZERO_COPY"), std::string::npos) << r.out << r.err;
}

// Multi-host simulation: one network namespace per process, af_packet on its veth, a bridge
// between them; --loss drops that share of every host's frames at random.
class AllreduceDpdkNetns : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string reason;
    if (!dpdk_usable(&reason)) GTEST_SKIP() << "dpdk is not usable here: " << reason;
    if (geteuid() != 0) GTEST_SKIP() << "network namespaces need root";
    prefix_ = "sd" + std::to_string(getpid() % 100000) + "_";
  }
  void TearDown() override {
    if (up_) run_program({source_path("scripts/netns-cluster"), "down", "--prefix", prefix_});
  }

  void cluster(int hosts, const std::string& loss, const std::string& reorder = "") {
    std::vector<std::string> argv = {source_path("scripts/netns-cluster"), "up", std::to_string(hosts), "--prefix",
                                     prefix_};
    if (!loss.empty()) argv.insert(argv.end(), {"--loss", loss});
    if (!reorder.empty()) argv.insert(argv.end(), {"--reorder", reorder});
    const auto r = run_program(argv, {}, std::chrono::seconds(60));
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    up_ = true;
  }

  LaunchResult run(int ranks, int aggregators, const std::vector<std::string>& args,
                   const std::vector<std::string>& env = {},
                   const std::string& program = "tests/integration/sparcoll-check") {
    std::vector<std::string> argv = {source_path("scripts/netns-run"), "-n", std::to_string(ranks), "--aggregators",
                                     std::to_string(aggregators), "--transport", "dpdk", "--prefix", prefix_,
                                     "--build", SPARCOLL_BUILD_DIR, "--timeout", "240"};
    for (const std::string& kv : env) argv.insert(argv.end(), {"--env", kv});
    argv.insert(argv.end(), {"--", build_path(program)});
    argv.insert(argv.end(), args.begin(), args.end());
    const auto r = run_program(argv, {}, std::chrono::seconds(300));
    EXPECT_EQ(r.exit_code, 0) << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
    EXPECT_NE(r.out.find("cases passed"), std::string::npos) << r.out;
    return r;
  }

  LaunchResult info() {
    const auto r = run_program({source_path("scripts/netns-cluster"), "info", "--prefix", prefix_}, {},
                               std::chrono::seconds(30));
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    return r;
  }

  // Frames the bridge held back to reorder them, over every port, from `netns-cluster info`.
  static std::uint64_t frames_sent_late(const std::string& info_out) {
    std::uint64_t total = 0;
    const std::string key = "slow class (reordering) sent ";
    for (std::size_t at = info_out.find(key); at != std::string::npos; at = info_out.find(key, at + 1))
      total += std::strtoull(info_out.c_str() + at + key.size(), nullptr, 10);
    return total;
  }

  std::string prefix_;
  bool up_ = false;
};

const std::vector<std::string> kNetnsMatrix = {"--sizes", "1,257,20001", "--dtypes", "f32,i32", "--ops", "sum,max",
                                               "--densities", "0,0.01,1", "--traffic"};

TEST_F(AllreduceDpdkNetns, TwoHostsAfPacket) {
  cluster(2, "");
  run(2, 0, kNetnsMatrix);
}

// More af_packet sockets than channels (qpairs=4, 2 channels): the kernel fans the flows out over
// all four sockets by hash, so most flows land on a queue that is not their channel's, or on
// one no channel owns. Every queue is configured and every channel reads every queue; before
// that, frames on the queues beyond the channels were never read and flows stalled (and a
// channel whose thread was idle, the collective thread or an aggregator's second channel,
// held the frames it received for the other: 5% loss under load stalled a job for 30 s).
TEST_F(AllreduceDpdkNetns, AfPacketWithMoreSocketsThanChannels) {
  cluster(3, "");
  const auto r = run(2, 1, kNetnsMatrix,
                     {"SPARCOLL_DPDK_EAL_ARGS=--vdev=net_af_packet0,iface=veth0,framecnt=4096,qpairs=4",
                      "SPARCOLL_LOG_LEVEL=info"});
  EXPECT_NE(r.err.find("4 rx / 2 tx queues"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("every channel reads every queue"), std::string::npos) << r.err;
}

TEST_F(AllreduceDpdkNetns, ThreeRanksAndADedicatedAggregatorAfPacket) {
  cluster(4, "");
  run(3, 1, kNetnsMatrix);
}

TEST_F(AllreduceDpdkNetns, CollectivesAfPacketWithLoss) {
  cluster(3, "1");
  run(3, 0, {"--sizes", "0,1,257,20001", "--dtypes", "f32,i32", "--ops", "sum,max"}, {},
      "tests/integration/sparcoll-check-collectives");
}

TEST_F(AllreduceDpdkNetns, OnePercentLossStillExact) {
  cluster(3, "1");
  run(3, 0, kNetnsMatrix);
}

// Zero-copy in port mode: af_packet copies every segment of a chained frame into its tx ring;
// with 1% random loss, retransmissions read the registered buffers again.
TEST_F(AllreduceDpdkNetns, ZeroCopyAfPacketWithLoss) {
  cluster(2, "1");
  const auto r = run(2, 0, {"--register", "--sizes", "257,100003", "--dtypes", "f32,i32", "--ops", "sum", "--densities",
                            "0.01,1", "--patterns", "random", "--traffic", "--algo", "block_sparse"},
                     {"SPARCOLL_LOG_LEVEL=info"});
  EXPECT_NE((r.out + r.err).find("zero-copy sends from registered user memory"), std::string::npos) << r.out << r.err;
  EXPECT_EQ((r.out + r.err).find("zero-copy is off"), std::string::npos) << r.out << r.err;
}

// Reordering on the wire: the bridge holds 5% of the frames back (netem's reorder where the kernel
// has it; else an htb slow class, see scripts/netns-cluster), on top of 1% loss. Late frames
// arrive after later ones, some after their retransmission (duplicates); the sums stay exact.
TEST_F(AllreduceDpdkNetns, ReorderingAndLossStillExact) {
  cluster(3, "1", "5");
  const auto r = run(3, 0, kNetnsMatrix);
  EXPECT_EQ(r.out.find(" retransmitted=0 "), std::string::npos) << "1% loss but nothing was resent:\n" << r.out;
  const auto shown = info();
  if (shown.out.find("impairment=netem") == std::string::npos) {
    EXPECT_GT(frames_sent_late(shown.out), 0u) << "no frame was held back:\n" << shown.out;
  }
}

// 5% loss with 2% of the frames reordered too, 2 ranks + 2 dedicated aggregators.
TEST_F(AllreduceDpdkNetns, FivePercentLossStillExact) {
  cluster(4, "5", "2");
  const auto r = run(2, 2, kNetnsMatrix);
  EXPECT_NE(r.out.find(" retransmitted="), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(" retransmitted=0 "), std::string::npos) << "5% loss but nothing was resent:\n" << r.out;
}

}  // namespace
