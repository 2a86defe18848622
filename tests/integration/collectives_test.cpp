// broadcast, allgather, reduce_scatter, reduce, gather, scatter and barrier end to end: sparcoll-run starts N real
// processes running sparcoll-check-collectives, which checks every result on every rank
// (collectives_check.cpp). With dedicated aggregators the workers still run these collectives
// among themselves, over the connections they make to each other for them.
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "launch_util.hpp"

namespace {

using sparcoll::testing::build_path;
using sparcoll::testing::launch;
using sparcoll::testing::LaunchResult;

// ranks x transport x dedicated aggregators (0 = co-located).
class CollectivesMatrix : public ::testing::TestWithParam<std::tuple<int, std::string, int>> {};

TEST_P(CollectivesMatrix, EveryKindDtypeOpSizeAndRoot) {
  const auto& [ranks, transport, aggregators] = GetParam();
  // Sizes 0, 1, block-1, block+1 and a few blocks with a tail; one ~1M-element case per kind and
  // dtype at 4 ranks (the largest run that stays quick on two cores); 4 collectives in flight.
  std::vector<std::string> args = {"--sizes", "0,1,255,257,1283", "--inflight", "4"};
  if (ranks == 4 && aggregators == 0) args.insert(args.end(), {"--large", "1000003"});
  // Eight ranks on two cores: fewer sizes (broadcast alone has a case per root).
  if (ranks >= 8) args = {"--sizes", "0,1,257,1283", "--ops", "sum,min", "--inflight", "4"};
  std::vector<std::string> argv = {"-n", std::to_string(ranks), "--transport", transport, "--aggregators",
                                   std::to_string(aggregators), "--timeout", "240", "--",
                                   build_path("tests/integration/sparcoll-check-collectives")};
  argv.insert(argv.end(), args.begin(), args.end());
  const LaunchResult r = launch(argv, {}, std::chrono::seconds(300));
  EXPECT_EQ(r.exit_code, 0) << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
  EXPECT_NE(r.out.find("cases passed"), std::string::npos) << r.out;
}

// send and recv outside collectives (p2p_check.cpp): ring exchanges, order, tags, any source,
// back-pressure, a size mismatch, bad arguments; at 1 to 8 ranks, on both transports, and with
// dedicated aggregators (the workers still reach each other directly).
TEST_P(CollectivesMatrix, SendAndRecv) {
  const auto& [ranks, transport, aggregators] = GetParam();
  const LaunchResult r = launch({"-n", std::to_string(ranks), "--transport", transport, "--aggregators",
                                 std::to_string(aggregators), "--timeout", "120", "--",
                                 build_path("tests/integration/sparcoll-check-p2p")},
                                {}, std::chrono::seconds(150));
  EXPECT_EQ(r.exit_code, 0) << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
  EXPECT_NE(r.out.find("cases passed"), std::string::npos) << r.out;
}

// A recv nobody sends to fails with `timeout` by SPARCOLL_DEADLINE_MS, and only it.
TEST(SendAndRecv, ARecvNobodySendsToExpires) {
  for (const char* transport : {"shm", "tcp"}) {
    const LaunchResult r = launch({"-n", "2", "--transport", transport, "--timeout", "60", "--",
                                   build_path("tests/integration/sparcoll-check-p2p"), "--expire"},
                                  {"SPARCOLL_DEADLINE_MS=800"}, std::chrono::seconds(90));
    EXPECT_EQ(r.exit_code, 0) << transport << "\nstdout:\n" << r.out << "\nstderr:\n" << r.err;
    EXPECT_NE(r.out.find("cases passed"), std::string::npos) << r.out;
  }
}

INSTANTIATE_TEST_SUITE_P(Collectives, CollectivesMatrix,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5, 8), ::testing::Values("shm", "tcp"),
                                            ::testing::Values(0, 2)),
                         [](const auto& info) {
                           return std::to_string(std::get<0>(info.param)) + "ranks_" + std::get<1>(info.param) + "_" +
                                  (std::get<2>(info.param) == 0 ? std::string("colocated")
                                                                : std::to_string(std::get<2>(info.param)) + "aggregators");
                         });

}  // namespace
