// The compressed allreduce end to end: sparcoll-run starts 4 real processes running
// sparcoll-compressed-check, which checks each algorithm by its contract (compressed_check.cpp).
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "launch_util.hpp"

namespace {

using sparcoll::testing::build_path;
using sparcoll::testing::launch;
using sparcoll::testing::LaunchResult;

LaunchResult run_mode(const std::string& mode, int ranks = 4) {
  return launch({"-n", std::to_string(ranks), "--transport", "shm", "--timeout", "120", "--",
                 build_path("tests/integration/sparcoll-compressed-check"), mode},
                {}, std::chrono::seconds(150));
}

void expect_passed(const LaunchResult& r, const std::string& mode, int ranks = 4) {
  EXPECT_EQ(r.exit_code, 0) << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
  for (int q = 0; q < ranks; ++q)
    EXPECT_NE(r.out.find("compressed " + mode + " rank " + std::to_string(q) + ": passed"), std::string::npos) << r.out;
  std::printf("%s", r.out.c_str());
}

TEST(Compressed, OkTopkContractVolumeAndIdenticalResults) { expect_passed(run_mode("oktopk"), "oktopk"); }
TEST(Compressed, OkTopkOddRankCount) { expect_passed(run_mode("oktopk", 3), "oktopk", 3); }
TEST(Compressed, TopkWithErrorFeedbackAllgatherAndRing) { expect_passed(run_mode("topk"), "topk"); }

TEST(Compressed, QsgdUnbiasedOverSeedsAndReproducibleWithAFixedSeed) {
  const LaunchResult a = run_mode("qsgd"), b = run_mode("qsgd");
  expect_passed(a, "qsgd");
  expect_passed(b, "qsgd");
  // The fixed-seed hashes: the same in both runs, and the same on every rank.
  std::regex line("qsgd hash rank \\d+ bits (\\d+): ([0-9a-f]+)");
  auto hashes = [&](const std::string& out) {
    std::set<std::string> s;
    for (std::sregex_iterator it(out.begin(), out.end(), line), end; it != end; ++it) s.insert((*it)[1].str() + ":" + (*it)[2].str());
    return s;
  };
  EXPECT_EQ(hashes(a.out).size(), 3u) << a.out;  // one per bit width, every rank agreeing
  EXPECT_EQ(hashes(a.out), hashes(b.out));
}

TEST(Compressed, BadInputFailsOnEveryRankWithoutHanging) { expect_passed(run_mode("bad"), "bad"); }
TEST(Compressed, TrainingReachesTheDenseLossWithinTheStatedBounds) { expect_passed(run_mode("train"), "train"); }

}  // namespace
