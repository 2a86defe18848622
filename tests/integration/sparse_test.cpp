// allreduce_sparse end to end (sparse_check.cpp, sparse_fault_check.cpp under sparcoll-run):
// every SparCML algorithm against a plain reference merge on 1..8 ranks over shm and tcp, and
// bad input on one rank failing that rank clearly and every other rank too, without a hang.
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "launch_util.hpp"

namespace {

using sparcoll::testing::build_path;
using sparcoll::testing::launch;
using sparcoll::testing::LaunchResult;

LaunchResult run_sparse_check(int ranks, const std::string& transport, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"-n", std::to_string(ranks), "--transport", transport, "--timeout", "240", "--",
                                   build_path("tests/integration/sparcoll-sparse-check")};
  argv.insert(argv.end(), args.begin(), args.end());
  // Yield while waiting: with 2 ranks the job does not count as oversubscribed, but on the 2
  // shared cores the tests run on, spinning collective and progress threads starve each other.
  return launch(argv, {"SPARCOLL_POLL_MODE=yield"}, std::chrono::seconds(300));
}

void expect_passed(const LaunchResult& r) {
  EXPECT_EQ(r.exit_code, 0) << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
  EXPECT_NE(r.out.find("cases passed"), std::string::npos) << r.out;
}

class SparseMatrix : public ::testing::TestWithParam<std::tuple<int, std::string>> {};

// Every algorithm, dtype and op; dims 0, 1, 7, 1283; each rank holding 0%, 30%, 100% of the
// indices; identical, random and disjoint supports.
TEST_P(SparseMatrix, EveryAlgorithmDtypeOpDimFillAndPattern) {
  const auto& [ranks, transport] = GetParam();
  std::vector<std::string> args = {"--dims", "0,1,7,1283", "--fills", "0,0.3,1", "--inflight", "6"};
  // Many ranks on 2 busy cores: the ops that differ (sum, min) and the patterns that differ.
  if (ranks >= 4) args.insert(args.end(), {"--ops", "sum,min", "--patterns", "random,disjoint"});
  if (ranks >= 5) args.insert(args.end(), {"--dims", "1,1283", "--fills", "0.3,1"});
  expect_passed(run_sparse_check(ranks, transport, args));
}

INSTANTIATE_TEST_SUITE_P(Sparse, SparseMatrix,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5, 8), ::testing::Values("shm", "tcp")),
                         [](const auto& info) {
                           return std::to_string(std::get<0>(info.param)) + "ranks_" + std::get<1>(info.param);
                         });

class SparseTransport : public ::testing::TestWithParam<std::string> {};

TEST_P(SparseTransport, RandomFloatsExactInRankOrderAndWithinTheBoundOtherwise) {
  expect_passed(run_sparse_check(5, GetParam(),
                                 {"--random-floats", "--ops", "sum,max", "--dims", "1,1283,20000", "--fills", "0.01,1",
                                  "--patterns", "random,same", "--inflight", "6"}));
}

TEST_P(SparseTransport, DefaultAlgorithmAndLargeVectorsSplitIntoManyFragments) {
  expect_passed(run_sparse_check(3, GetParam(),
                                 {"--algos", "default,ssar_recursive_doubling", "--dtypes", "f32,bf16", "--ops", "sum",
                                  "--dims", "100003", "--fills", "0.001,0.6", "--patterns", "random"}));
}

TEST_P(SparseTransport, FromCThroughTheCApi) {
  const LaunchResult r = launch({"-n", "3", "--transport", GetParam(), "--timeout", "60", "--",
                                 build_path("tests/integration/sparcoll-c-sparse-check")},
                                {"SPARCOLL_POLL_MODE=yield"}, std::chrono::seconds(90));
  EXPECT_EQ(r.exit_code, 0) << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
  EXPECT_NE(r.out.find("c sparse: ok"), std::string::npos) << r.out;
}

INSTANTIATE_TEST_SUITE_P(Sparse, SparseTransport, ::testing::Values("shm", "tcp"));

// Bad input on rank 1: it fails with invalid_argument naming position and value, the others
// with invalid_argument naming rank 1, quickly; then the communicator still works.
class SparseFault : public ::testing::TestWithParam<std::tuple<std::string, std::string, std::string>> {};

TEST_P(SparseFault, EveryRankGetsTheExpectedError) {
  const auto& [scenario, algo, transport] = GetParam();
  const LaunchResult r = launch({"-n", "3", "--transport", transport, "--timeout", "60", "--",
                                 build_path("tests/integration/sparcoll-sparse-fault"), scenario, algo},
                                {"SPARCOLL_DEADLINE_MS=3000"}, std::chrono::seconds(90));
  EXPECT_EQ(r.exit_code, 0) << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
  EXPECT_EQ(r.out.find("unexpected"), std::string::npos) << r.out;
  EXPECT_LT(r.seconds, 20.0) << r.out;  // failed at once, not at the deadline
}

INSTANTIATE_TEST_SUITE_P(
    Sparse, SparseFault,
    ::testing::Combine(::testing::Values("unsorted", "duplicate", "index_too_large", "negative_index", "nnz_above_dim",
                                         "dense_algorithm", "dim_mismatch"),
                       ::testing::Values("ssar_recursive_doubling", "dsar_split_allgather"),
                       ::testing::Values("shm", "tcp")),
    [](const auto& info) {
      return std::get<0>(info.param) + "_" + std::get<1>(info.param) + "_" + std::get<2>(info.param);
    });

}  // namespace
