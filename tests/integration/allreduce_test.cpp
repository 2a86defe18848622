// The allreduce correctness matrix, end to end: sparcoll-run starts N real processes running
// sparcoll-check, which compares every element of every result with perf::reference() (exact:
// the library reduces in rank order, so results are deterministic and equal on every rank).
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "launch_util.hpp"
#include "transport/driver.hpp"

namespace {

using sparcoll::testing::build_path;
using sparcoll::testing::launch;
using sparcoll::testing::LaunchResult;
using sparcoll::testing::run_program;

LaunchResult run_check(int ranks, const std::string& transport, int aggregators, const std::vector<std::string>& args,
                       const std::vector<std::string>& env = {}) {
  std::vector<std::string> argv = {"-n", std::to_string(ranks), "--transport", transport, "--aggregators",
                                   std::to_string(aggregators), "--timeout", "240", "--",
                                   build_path("tests/integration/sparcoll-check")};
  argv.insert(argv.end(), args.begin(), args.end());
  return launch(argv, env, std::chrono::seconds(300));
}

void expect_passed(const LaunchResult& r) {
  EXPECT_EQ(r.exit_code, 0) << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
  EXPECT_NE(r.out.find("cases passed"), std::string::npos) << r.out;
}

// ranks x transport x dedicated aggregators (0 = co-located).
class AllreduceMatrix : public ::testing::TestWithParam<std::tuple<int, std::string, int>> {};

TEST_P(AllreduceMatrix, EveryDtypeOpSizeDensityAndPattern) {
  const auto& [ranks, transport, aggregators] = GetParam();
  // Sizes 0, 1, block-1, block+1 (block 256) and a few blocks with a short tail; densities 0,
  // 0.1%, 1%, 10%, 100%; overlapping, disjoint and random supports; 3 ops in flight.
  std::vector<std::string> args = {"--sizes", "0,1,255,257,1283", "--inflight", "3"};
  if (ranks >= 8) args.insert(args.end(), {"--patterns", "random,disjoint"});
  expect_passed(run_check(ranks, transport, aggregators, args));
}

INSTANTIATE_TEST_SUITE_P(Allreduce, AllreduceMatrix,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5, 8), ::testing::Values("shm", "tcp"),
                                            ::testing::Values(0, 2)),
                         [](const auto& info) {
                           return std::to_string(std::get<0>(info.param)) + "ranks_" + std::get<1>(info.param) + "_" +
                                  (std::get<2>(info.param) == 0 ? std::string("colocated")
                                                                : std::to_string(std::get<2>(info.param)) + "aggregators");
                         });

// The dense algorithms of the collective thread (ring, butterfly) over the same matrix: they
// ignore sparsity, so one density pattern is enough; zero, sparse and dense inputs still all
// run. ranks x transport x algorithm; butterfly at 3, 5 folds the ranks above a power of two.
class DenseAllreduceMatrix : public ::testing::TestWithParam<std::tuple<int, std::string, std::string>> {};

TEST_P(DenseAllreduceMatrix, EveryDtypeOpAndSize) {
  const auto& [ranks, transport, algo] = GetParam();
  std::vector<std::string> args = {"--algo",     algo,    "--sizes",    "0,1,255,257,1283", "--densities",
                                   "0,0.1,1",    "--patterns", "random", "--inflight", "3"};
  if (ranks >= 8) args = {"--algo", algo, "--sizes", "0,1,257,1283", "--densities", "0.1,1", "--patterns", "random",
                          "--inflight", "3"};
  expect_passed(run_check(ranks, transport, 0, args));
}

INSTANTIATE_TEST_SUITE_P(Dense, DenseAllreduceMatrix,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5, 8), ::testing::Values("shm", "tcp"),
                                            ::testing::Values("ring", "butterfly", "recursive_doubling")),
                         [](const auto& info) {
                           return std::to_string(std::get<0>(info.param)) + "ranks_" + std::get<1>(info.param) + "_" +
                                  std::get<2>(info.param);
                         });

// The ring in segments of 1 KiB of accumulators (256 elements; the default is 2 MiB): many
// segments, a tail shorter than the ranks (1283 = 5 x 256 + 3), chunks of no elements, and f16 /
// bf16, whose fp32 accumulators are twice their bytes. Then the hybrid, whose dense stripes run
// the ring, with its runs of dense stripes in segments.
class RingSegmentsMatrix : public ::testing::TestWithParam<std::tuple<int, std::string>> {};

TEST_P(RingSegmentsMatrix, EveryDtypeOpAndSizeInSmallSegments) {
  const auto& [ranks, transport] = GetParam();
  expect_passed(run_check(ranks, transport, 0,
                          {"--algo", "ring", "--sizes", "0,1,255,257,1283,4099", "--densities", "0,0.1,1", "--patterns",
                           "random", "--inflight", "3"},
                          {"SPARCOLL_RING_SEGMENT_BYTES=1024"}));
}

INSTANTIATE_TEST_SUITE_P(Ring, RingSegmentsMatrix,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5, 8), ::testing::Values("shm", "tcp")),
                         [](const auto& info) {
                           return std::to_string(std::get<0>(info.param)) + "ranks_" + std::get<1>(info.param);
                         });

TEST(HybridAllreduce, DenseStripesRunTheRingInSegments) {
  expect_passed(run_check(3, "tcp", 0,
                          {"--algo", "hybrid", "--sizes", "400003", "--densities", "0.01,0.5,1", "--patterns",
                           "random,dense_half", "--inflight", "2"},
                          {"SPARCOLL_HYBRID_MIN_BYTES=0", "SPARCOLL_RING_SEGMENT_BYTES=65536"}));
}

// auto's small allreduces run in the calling thread when nothing is queued (coll/executor.hpp,
// run_here), else on the collective thread behind the queued ones: with 4 in flight, small and
// large sizes mixed, each rank's stream switches between the two, and the order (and every sum)
// must come out the same as when everything is queued.
TEST(AllreduceInCallingThread, SmallOnesBetweenQueuedLargeOnes) {
  for (const char* transport : {"shm", "tcp"})
    expect_passed(run_check(3, transport, 0,
                            {"--sizes", "1,257,300007,1283,0,100003", "--densities", "0.1,1", "--patterns", "random",
                             "--inflight", "4", "--repeat", "2"}));
}

// Block recursive doubling: every message a block set (bitmap + the non-zero blocks seen so far),
// merged in a fixed tree. Sizes with short tails, densities from none to all, one dense rank
// among sparse ones, -0.0 in odd ranks' zeros (every rank must still end with the same bytes),
// min and max (zero is not their neutral element), 3 ranks and 5 fold a rank out.
class BlockRecursiveDoublingMatrix : public ::testing::TestWithParam<std::tuple<int, std::string>> {};

TEST_P(BlockRecursiveDoublingMatrix, EveryDtypeOpSizeDensityAndPattern) {
  const auto& [ranks, transport] = GetParam();
  std::vector<std::string> args = {"--algo",     "block_recursive_doubling", "--sizes", "0,1,255,257,1283,100003",
                                   "--densities", "0,0.1,0.5,1", "--patterns", "random,one_dense", "--inflight", "3",
                                   "--negative-zeros"};
  if (ranks >= 8) args = {"--algo",     "block_recursive_doubling", "--sizes", "0,1,1283,100003", "--densities",
                          "0.1,1",      "--patterns", "random", "--inflight", "3"};
  expect_passed(run_check(ranks, transport, 0, args));
}

INSTANTIATE_TEST_SUITE_P(BlockRecursiveDoubling, BlockRecursiveDoublingMatrix,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5, 8), ::testing::Values("shm", "tcp")),
                         [](const auto& info) {
                           return std::to_string(std::get<0>(info.param)) + "ranks_" + std::get<1>(info.param);
                         });

// The hybrid allreduce: stripes of one tensor split between block-sparse and the dense path.
// SPARCOLL_HYBRID_DENSE_PERCENT 0 sends every stripe dense, 101 none, 40 (auto's at 4 ranks over shm) splits
// dense_half tensors (dense first half, sparse second half) and follows the density elsewhere.
// Sizes above 512 blocks make several stripes; min and max check the stripes' zeros.
// SPARCOLL_HYBRID_MIN_BYTES=0: these sizes are split into stripes (below 2 MiB the hybrid would
// send them whole; HybridAllreduce.SmallTensorsGoWhole below).
class HybridAllreduceMatrix : public ::testing::TestWithParam<std::tuple<int, std::string, std::string>> {};

TEST_P(HybridAllreduceMatrix, EveryDtypeOpSizeDensityAndPattern) {
  const auto& [ranks, transport, percent] = GetParam();
  std::vector<std::string> args = {"--algo", "hybrid", "--sizes", "0,1,1283,400003", "--densities", "0,0.5,1",
                                   "--patterns", "random,dense_half", "--inflight", "3"};
  expect_passed(run_check(ranks, transport, 0, args,
                          {"SPARCOLL_HYBRID_DENSE_PERCENT=" + percent, "SPARCOLL_HYBRID_MIN_BYTES=0"}));
}

INSTANTIATE_TEST_SUITE_P(Hybrid, HybridAllreduceMatrix,
                         ::testing::Combine(::testing::Values(1, 2, 3), ::testing::Values("shm", "tcp"),
                                            ::testing::Values("0", "40", "101")),
                         [](const auto& info) {
                           return std::to_string(std::get<0>(info.param)) + "ranks_" + std::get<1>(info.param) + "_" +
                                  std::get<2>(info.param) + "percent";
                         });

// More ranks (oversubscribed cores): the split case only, fewer sizes.
TEST(HybridAllreduce, FourAndFiveRanksSplitTheStripes) {
  for (const int ranks : {4, 5})
    for (const char* transport : {"shm", "tcp"})
      expect_passed(run_check(ranks, transport, 0,
                              {"--algo", "hybrid", "--sizes", "1,400003", "--densities", "0.01,1", "--patterns",
                               "dense_half", "--ops", "sum,min", "--inflight", "3"},
                              {"SPARCOLL_HYBRID_MIN_BYTES=0"}));
}

// Below SPARCOLL_HYBRID_MIN_BYTES (2 MiB) the hybrid sends the whole tensor one way, chosen from
// the exchanged densities: block recursive doubling for the sparse ones, the ring for the dense
// ones, on every rank the same. Both sides of the choice, over both transports.
TEST(HybridAllreduce, SmallTensorsGoWholeByBlockRecursiveDoublingOrTheRing) {
  for (const int ranks : {2, 3, 4})
    for (const char* transport : {"shm", "tcp"})
      expect_passed(run_check(ranks, transport, 0,
                              {"--algo", "hybrid", "--sizes", "1,1283,100003", "--densities", "0,0.05,0.5,1",
                               "--patterns", "random,one_dense", "--inflight", "3", "--negative-zeros"}));
}

// `auto` over a wire sends the top of the small range (above block recursive doubling's limit:
// 32 KiB at 2 and 4 ranks, 16 KiB at 8) by the hybrid, which picks block recursive doubling or
// the dense algorithm from the masks: 48 and 64 KiB of f32 and i32 (bf16 halves them, below the
// limit), every op, sparse to dense, -0 in odd ranks.
TEST(HybridAllreduce, AutoSendsTheTopOfTheSmallRangeOverAWireByTheHybrid) {
  for (const int ranks : {2, 3, 4})
    expect_passed(run_check(ranks, "tcp", 0,
                            {"--sizes", "12000,16384", "--dtypes", "f32,bf16,i32", "--ops", "sum,min,max",
                             "--densities", "0,0.1,0.5,1", "--patterns", "random,one_dense", "--inflight", "3",
                             "--negative-zeros"}));
}

// From SPARCOLL_HYBRID_MIN_BYTES to 4 times that (9 times over a wire) the hybrid plans the
// tensor as one sent whole and sends it whole by block recursive doubling when that is picked,
// else in stripes. With the limit at 256 KiB, 200003 f32 (two stripes) and 100003 are in that
// range: the sparse ones go whole, the dense and half-dense ones split; bf16 halves the bytes
// (100003 is then below it). 393219 f32 (1.5 MiB, three stripes) is in it over tcp only: in
// stripes over shm. Every dtype, min and max where zero is not neutral, -0 in odd ranks, 2 to 4
// ranks.
TEST(HybridAllreduce, MiddleSizedTensorsGoWholeWhenSparseElseInStripes) {
  for (const int ranks : {2, 3, 4})
    for (const char* transport : {"shm", "tcp"})
      expect_passed(run_check(ranks, transport, 0,
                              {"--algo", "hybrid", "--sizes", "100003,200003,393219", "--dtypes", "f32,bf16,i32", "--ops",
                               "sum,min,max", "--densities", "0.01,0.5,1", "--patterns", "random,dense_half,one_dense",
                               "--inflight", "3", "--negative-zeros"},
                              {"SPARCOLL_HYBRID_MIN_BYTES=262144"}));
}

// The hybrid decides from sampled densities and scans only the stripes it leaves block-sparse:
// the dense stripes are never read in full, the sparse ones beside them are. In place, with -0.0
// in the zero elements of odd ranks, the scanned stripes still turn -0.0 blocks into +0 and the
// bytes come out identical everywhere.
TEST(HybridAllreduce, DenseStripesUnscannedBesideScannedOnesWithNegativeZeros) {
  for (const char* transport : {"shm", "tcp"})
    expect_passed(run_check(3, transport, 0,
                            {"--algo", "hybrid", "--sizes", "400003,1000001", "--dtypes", "f32,bf16", "--ops", "sum,max",
                             "--densities", "0.3,1", "--patterns", "dense_half,random", "--negative-zeros"},
                            {"SPARCOLL_HYBRID_MIN_BYTES=0"}));
}

// With dedicated aggregators the block-sparse half runs through them and the dense half
// between the workers.
TEST(HybridAllreduce, WithDedicatedAggregators) {
  expect_passed(run_check(3, "shm", 2,
                          {"--algo", "hybrid", "--sizes", "1,400003", "--densities", "0.01,1", "--patterns",
                           "dense_half,random"},
                          {"SPARCOLL_HYBRID_MIN_BYTES=0"}));
}

// The direct algorithm reads peers' memory in place: shm only. A size above one piece (32768
// elements) so chunks are read in several pieces.
class DirectAllreduceMatrix : public ::testing::TestWithParam<int> {};

TEST_P(DirectAllreduceMatrix, EveryDtypeOpAndSize) {
  expect_passed(run_check(GetParam(), "shm", 0,
                          {"--algo", "direct", "--sizes", "0,1,255,257,1283,100003", "--densities", "0,0.1,1",
                           "--patterns", "random", "--inflight", "3"}));
}

INSTANTIATE_TEST_SUITE_P(Direct, DirectAllreduceMatrix, ::testing::Values(1, 2, 3, 4, 5, 8),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

// Over a transport that cannot read peers' memory, or when the user turned it off, the direct
// algorithm is refused on every rank with a message that says why; the communicator goes on.
TEST(DirectAllreduce, UnsupportedWhereTheTransportCannotReadPeersMemory) {
  for (const std::vector<std::string>& env :
       {std::vector<std::string>{"SPARCOLL_TRANSPORT=tcp"},
        std::vector<std::string>{"SPARCOLL_TRANSPORT=shm", "SPARCOLL_SHM_PEER_READS=off"}}) {
    const LaunchResult r = launch({"-n", "2", "--", build_path("tests/integration/sparcoll-check"), "--algo", "direct",
                                   "--sizes", "1000", "--densities", "1", "--patterns", "random"},
                                  env, std::chrono::seconds(60));
    EXPECT_NE(r.exit_code, 0) << r.out;
    EXPECT_NE((r.out + r.err).find("reads peers' memory in place"), std::string::npos) << r.out << r.err;
  }
}

// The SparCML algorithms (dense input converted to sparse, the dense result written whole):
// ranks x transport x algorithm, exact against the same reference, bitwise equal on every rank.
class SparseAlgorithmMatrix : public ::testing::TestWithParam<std::tuple<int, std::string, std::string>> {};

TEST_P(SparseAlgorithmMatrix, EveryDtypeOpSizeDensityAndPattern) {
  const auto& [ranks, transport, algo] = GetParam();
  std::vector<std::string> args = {"--algo", algo, "--sizes", "0,1,255,257,1283", "--inflight", "6"};
  // Many ranks on 2 busy cores: the overlapping pattern adds time, not coverage.
  if (ranks >= 5) args.insert(args.end(), {"--patterns", "random,disjoint"});
  // Yield while waiting: on the 2 shared cores, spinning threads of 2 ranks starve each other.
  expect_passed(run_check(ranks, transport, 0, args, {"SPARCOLL_POLL_MODE=yield"}));
}

INSTANTIATE_TEST_SUITE_P(Sparcml, SparseAlgorithmMatrix,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5, 8), ::testing::Values("shm", "tcp"),
                                            ::testing::Values("ssar_recursive_doubling", "ssar_split_allgather",
                                                              "dsar_split_allgather")),
                         [](const auto& info) {
                           return std::to_string(std::get<0>(info.param)) + "ranks_" + std::get<1>(info.param) + "_" +
                                  std::get<2>(info.param);
                         });

class AllreduceTransport : public ::testing::TestWithParam<std::string> {};

TEST_P(AllreduceTransport, LargeTensorsWithOddTail) {
  expect_passed(run_check(4, GetParam(), 0,
                          {"--sizes", "1000003", "--dtypes", "f32,f16,bf16,i32", "--ops", "sum,avg,max", "--densities",
                           "0.001,0.1,1", "--patterns", "random", "--inflight", "2"}));
}

// shm and tcp keep no counters of their own: transport_counters() is empty and TrafficStats's
// packet fields stay zero (dpdk's are checked in allreduce_dpdk_test.cpp).
TEST_P(AllreduceTransport, NoTransportCountersWhereTheTransportKeepsNone) {
  const LaunchResult r = run_check(2, GetParam(), 0, {"--sizes", "1000", "--dtypes", "f32", "--ops", "sum", "--densities",
                                                      "0.5", "--traffic"});
  expect_passed(r);
  EXPECT_NE(r.out.find("traffic (all ranks): packets_sent=0 retransmitted=0 dropped_invalid=0 duplicates=0 \n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("transport counters (rank 0): \n"), std::string::npos) << r.out;
}

TEST_P(AllreduceTransport, OneDedicatedAggregatorServesEveryLane) {
  expect_passed(run_check(3, GetParam(), 1,
                          {"--sizes", "1,257,100003", "--dtypes", "f32,i32", "--ops", "sum,min", "--densities",
                           "0,0.01,1", "--patterns", "random,one_dense"}));
}

TEST_P(AllreduceTransport, ManyOpsInFlightBeyondTheSlotCount) {
  expect_passed(run_check(3, GetParam(), 0,
                          {"--sizes", "1,300,5000", "--dtypes", "f32", "--ops", "sum,max", "--densities", "0.01,0.5",
                           "--inflight", "12", "--repeat", "2"},
                          {"SPARCOLL_MAX_INFLIGHT=2"}));
}

TEST_P(AllreduceTransport, TinyBlocksOneLaneNoFusion) {
  expect_passed(run_check(3, GetParam(), 0,
                          {"--sizes", "0,1,6,7,8,100", "--dtypes", "f32,f16", "--densities", "0,0.3,1"},
                          {"SPARCOLL_BLOCK_ELEMS=7", "SPARCOLL_LANES=1", "SPARCOLL_FUSION=1"}));
}

TEST_P(AllreduceTransport, ResultsSplitOverSeveralMessages) {
  // 4 KiB messages carry 3 blocks of 256 floats: a round's result (up to 4 x 3 blocks) is split.
  expect_passed(run_check(4, GetParam(), 0,
                          {"--sizes", "1,70001", "--dtypes", "f32,bf16", "--ops", "sum,min", "--densities", "0.1,1",
                           "--patterns", "random,overlap"},
                          {"SPARCOLL_MAX_MESSAGE=4096", "SPARCOLL_SHM_RING_BYTES=65536", "SPARCOLL_LANES=5"}));
}

TEST_P(AllreduceTransport, TwoProgressThreads) {
  expect_passed(run_check(2, GetParam(), 0,
                          {"--sizes", "1,257,50001", "--dtypes", "f32,i32", "--densities", "0.01,1", "--inflight", "4"},
                          {"SPARCOLL_THREADS=2", "SPARCOLL_LANES=6"}));
}

TEST_P(AllreduceTransport, EventModeProgressThreadsSleepOnTheTransport) {
  // tcp sleeps on its epoll set; shm has no descriptor and keeps polling (same results).
  expect_passed(run_check(3, GetParam(), 0,
                          {"--sizes", "1,257,20001", "--dtypes", "f32,i32", "--densities", "0,0.01,1", "--inflight", "4"},
                          {"SPARCOLL_POLL_MODE=event"}));
}

TEST_P(AllreduceTransport, NegativeZerosStillGiveIdenticalBytesEverywhere) {
  expect_passed(run_check(3, GetParam(), 0,
                          {"--sizes", "1,257,20001", "--dtypes", "f32,f16,bf16", "--ops", "sum,max", "--densities",
                           "0,0.1,1", "--negative-zeros"}));
}

// register_buffer is accepted everywhere (shm and tcp keep copying) and rejects bad calls.
TEST_P(AllreduceTransport, RegisteredSendBuffersAndRegistrationErrors) {
  expect_passed(run_check(2, GetParam(), 0,
                          {"--register", "--sizes", "1,20001", "--dtypes", "f32", "--ops", "sum", "--densities", "0.01,1"}));
}

INSTANTIATE_TEST_SUITE_P(Allreduce, AllreduceTransport, ::testing::Values("shm", "tcp"));

// SPARCOLL_TRANSPORT=auto (src/membership/auto_transport.cpp) in whole jobs. For "several hosts"
// each rank runs in a UTS namespace of its own under another hostname, so each has its own host
// identity: auto must pick a transport that crosses hosts (shm would refuse them), the best one
// every rank can run: rdma where it is usable (the Soft-RoCE VM), else tcp.
LaunchResult run_auto(int ranks, bool separate_hosts) {
  const std::string check = build_path("tests/integration/sparcoll-check") +
                            " --sizes 1,257,20001 --dtypes f32,i32 --ops sum,max --densities 0,0.1,1";
  std::vector<std::string> argv = {"-n", std::to_string(ranks), "--transport", "auto", "--env", "SPARCOLL_LOG_LEVEL=debug",
                                   "--timeout", "240", "--"};
  if (separate_hosts) {
    argv.insert(argv.end(), {"/usr/bin/unshare", "--uts", "/bin/sh", "-c", "hostname \"host-$SPARCOLL_RANK\" && exec " + check});
  } else {
    argv.insert(argv.end(), {"/bin/sh", "-c", "exec " + check});
  }
  return launch(argv, {}, std::chrono::seconds(300));
}

TEST(AllreduceAutoTransport, OneHostRunsOverShm) {
  const LaunchResult r = run_auto(3, false);
  expect_passed(r);
  EXPECT_NE(r.out.find("passed on 3 ranks over shm"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("transport auto: shm (every process is on one host)"), std::string::npos) << r.err;
}

TEST(AllreduceAutoTransport, SeveralHostsRunOverTheBestTransportTheyAllHave) {
  if (run_program({"/usr/bin/unshare", "--uts", "/bin/true"}, {}, std::chrono::seconds(10)).exit_code != 0)
    GTEST_SKIP() << "cannot make a UTS namespace here (unshare --uts needs root)";
  std::string reason;
  const std::string want = sparcoll::transport::driver_usable("rdma", &reason) ? "rdma" : "tcp";
  const LaunchResult r = run_auto(3, true);
  expect_passed(r);
  EXPECT_NE(r.out.find("passed on 3 ranks over " + want), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("transport auto: " + want + " (processes on several hosts"), std::string::npos) << r.err;
}

}  // namespace

namespace {

// Memory grows with the lanes a job's tensors use, not with the lanes configured: every lane of
// every op slot once had its block buffers made up front (SPARCOLL_LANES at its maximum with a
// 400 KB tensor: 552 MB per rank; now under 64 MB, with 4096 lanes).
TEST(AllreduceMemory, ManyLanesCostOnlyTheLanesUsed) {
  for (const char* aggregators : {"0", "1"}) {
    const sparcoll::testing::LaunchResult r =
        sparcoll::testing::launch({"-n", "3", "--aggregators", aggregators, "--",
                                   sparcoll::testing::build_path("tests/integration/sparcoll-memory-check"), "100000", "64"},
                                  {"SPARCOLL_LANES=4096"}, std::chrono::seconds(60));
    EXPECT_EQ(r.exit_code, 0) << aggregators << " aggregators:\n" << r.out << r.err;
    EXPECT_NE(r.out.find("memory-check: ok"), std::string::npos) << r.out;
  }
}

}  // namespace

namespace {

// avg(INT32_MAX, INT32_MAX) was -1: the sum wrapped before the division. Now exact with every
// algorithm, co-located and with a dedicated aggregator; sum still wraps, as documented.
TEST(AllreduceInt32, AvgIsExactAndSumWrapsWithEveryAlgorithm) {
  for (const char* ranks : {"2", "3"}) {
    for (const char* aggregators : {"0", "1"}) {
      const sparcoll::testing::LaunchResult r = sparcoll::testing::launch(
          {"-n", ranks, "--aggregators", aggregators, "--",
           sparcoll::testing::build_path("tests/integration/sparcoll-int-avg-check")},
          {}, std::chrono::seconds(60));
      EXPECT_EQ(r.exit_code, 0) << ranks << " ranks, " << aggregators << " aggregators:\n" << r.out << r.err;
    }
  }
}

// product and band, whose zero is not neutral (a rank's zero block zeroes the result's), bor and
// bxor, with every algorithm and dtype, allreduce and reduce, co-located and with a dedicated
// aggregator.
TEST(AllreduceOps, ProductAndBitwiseWithEveryAlgorithmDtypeAndTransport) {
  struct Run {
    const char *transport, *ranks, *aggregators;
  };
  for (const Run& run : {Run{"shm", "2", "0"}, Run{"shm", "3", "0"}, Run{"tcp", "3", "1"}, Run{"tcp", "4", "0"}}) {
    const sparcoll::testing::LaunchResult r = sparcoll::testing::launch(
        {"-n", run.ranks, "--transport", run.transport, "--aggregators", run.aggregators, "--",
         sparcoll::testing::build_path("tests/integration/sparcoll-ops-check")},
        {}, std::chrono::seconds(120));
    EXPECT_EQ(r.exit_code, 0) << run.transport << ", " << run.ranks << " ranks, " << run.aggregators
                              << " aggregators:\n" << r.out << r.err;
    EXPECT_NE(r.out.find("cases ok"), std::string::npos) << r.out;
  }
}

}  // namespace
