// The perf suite's programs on bad input: unknown flags, impossible combinations and failing
// runs end with a clear message and a non-zero exit code (2 for bad flags), never a hang.
#include <unistd.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../integration/launch_util.hpp"

namespace {

using sparcoll::testing::build_path;
using sparcoll::testing::LaunchResult;
using sparcoll::testing::run_program;
using sparcoll::testing::source_path;

bool exists(const std::string& path) { return access(path.c_str(), X_OK) == 0; }

struct BadCase {
  std::vector<std::string> args;
  std::string message;
};

void expect_usage_error(const std::string& program, const std::vector<BadCase>& cases, int code = 2,
                        const std::vector<std::string>& env = {}) {
  for (const BadCase& c : cases) {
    std::vector<std::string> argv = {program};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    const LaunchResult r = run_program(argv, env, std::chrono::seconds(60));
    EXPECT_EQ(r.exit_code, code) << ::testing::PrintToString(argv) << "\nstdout:\n" << r.out << "\nstderr:\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos)
        << ::testing::PrintToString(argv) << ": stderr should mention '" << c.message << "':\n" << r.err;
  }
}

TEST(PerfCli, SparcollPerfRejectsBadFlags) {
  expect_usage_error(build_path("perf/sparcoll-perf"),
                     {{{"--bogus"}, "unknown flag --bogus"},
                      {{"--density", "1.5"}, "[0, 1]"},
                      {{"--block", "0"}, "block sizes are integers"},
                      {{"-b", "1M", "-e", "4K"}, "larger than -e"},
                      {{"-b", "4K", "-e", "1M", "-f", "1"}, "must be at least 2"},
                      {{"--elements", "10", "-b", "4K"}, "use one of them"},
                      {{"--transport"}, "missing value"},
                      {{"--register", "--out-of-place"}, "--register"},
                      {{"--call-by-call", "--read-floor"}, "--read-floor runs none"},
                      {{"--call-by-call", "--register", "--algo", "ring,hybrid"}, "one --algo"},
                      {{"--pattern", "trace:x", "--dtype", "f16"}, "--dtype f32"}});
}

TEST(PerfCli, SparcollPerfVersionNamesTheCommit) {
  const LaunchResult r = run_program({build_path("perf/sparcoll-perf"), "--version"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("sparcoll-perf "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gradient traces: "), std::string::npos) << r.out;
}

TEST(PerfCli, DedicatedAggregatorsServeOneCommunicator) {
  const LaunchResult r = sparcoll::testing::launch(
      {"-n", "1", "--aggregators", "1", "--timeout", "60", "--", build_path("perf/sparcoll-perf"), "--block", "256,512"},
      {}, std::chrono::seconds(90));
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("dedicated aggregators"), std::string::npos) << r.err;
}

TEST(PerfCli, MissingTraceFileIsAClearError) {
  const LaunchResult r = sparcoll::testing::launch(
      {"-n", "1", "--timeout", "60", "--", build_path("perf/sparcoll-perf"), "--pattern", "trace:/nonexistent/x.sgtrace",
       "--iters", "1", "--warmup", "0"},
      {}, std::chrono::seconds(90));
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("/nonexistent/x.sgtrace"), std::string::npos) << r.err;
}

TEST(PerfCli, MpiPeerRejectsBadFlags) {
  const std::string program = build_path("perf/sparcoll-perf-mpi");
  if (!exists(program)) GTEST_SKIP() << program << " is not built (libopenmpi-dev missing at configure time)";
  expect_usage_error(program, {{{"--bogus"}, "unknown flag --bogus"},
                               {{"--dtype", "bf16"}, "f32 and i32 only"},
                               {{"--op", "avg"}, "no average"},
                               {{"--density", "2"}, "[0, 1]"},
                               {{"-b", "8K", "-e", "4K"}, "larger than -e"}});
}

TEST(PerfCli, GlooPeerRejectsBadFlags) {
  const std::string program = build_path("perf/sparcoll-perf-gloo");
  if (!exists(program)) GTEST_SKIP() << program << " is not built (libgloo-dev missing at configure time)";
  expect_usage_error(program, {{{"--algo", "bcube", "--rank", "0", "--size", "1"}, "unknown --algo"},
                               {{"--rank", "0", "--size", "2000"}, "more ranks than allowed"},
                               {{"--rank", "3", "--size", "2"}, "not below the world size"},
                               {{"--rank", "0", "--size", "1", "--block", "0"}, "block sizes"},
                               {{"--rank", "0", "--size", "1", "--dtype", "f16"}, "f32 and i32 only"}});
  // Started alone, without a launcher's variables: it cannot tell its rank.
  std::vector<std::string> argv = {"/usr/bin/env", "-u", "SPARCOLL_RANK", "-u", "SPARCOLL_WORLD_SIZE", "-u", "RANK",
                                   "-u", "WORLD_SIZE", "-u", "OMPI_COMM_WORLD_RANK", "-u", "OMPI_COMM_WORLD_SIZE",
                                   program};
  const LaunchResult r = run_program(argv);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("cannot tell the rank"), std::string::npos) << r.err;
}

TEST(PerfCli, KernelsRejectBadFlags) {
  expect_usage_error(build_path("perf/sparcoll-perf-kernels"),
                     {{{"--bytes", "1"}, "--bytes"}, {{"--reps", "0"}, "--reps"}, {{"--frobnicate"}, "unknown flag"}});
}

TEST(PerfCli, CoreLatencyRejectsBadFlagsAndMeasures) {
  const std::string program = build_path("perf/sparcoll-core-latency");
  expect_usage_error(program, {{{"--cpus", "0"}, "two different cpu numbers"},
                               {{"--cpus", "1,1"}, "two different cpu numbers"},
                               {{"--round-trips", "0"}, "--round-trips"},
                               {{"--round-trips", "12x"}, "--round-trips"},
                               {{"--cpus", "0,100000"}, "cpu numbers go up to 1023"},
                               {{"--frobnicate"}, "unknown argument"}});
  expect_usage_error(program, {{{"--cpus", "0,1000"}, "cannot pin threads to cpus 0 and 1000"}}, 1);
  // On one cpu there is nothing to measure: a clear error, not a hang of two spinning threads.
  expect_usage_error("/usr/bin/taskset", {{{"-c", "0", program}, "it needs two"}}, 1);
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) GTEST_SKIP() << "one cpu: no round trip to measure";
  const LaunchResult r = run_program({program, "--round-trips", "2000", "--json"}, {}, std::chrono::seconds(60));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"round_trip_ns\": "), std::string::npos) << r.out;
}

TEST(PerfCli, BenchAllRejectsBadFlags) {
  expect_usage_error(source_path("scripts/bench-all"),
                     {{{"--ranks", "0"}, "more ranks than allowed"},
                      {{"--ranks", "2,5000"}, "more ranks than allowed"},
                      {{"--ranks", "two"}, "list of integers"},
                      {{"--systems", "sparcoll,nccl"}, "unknown system 'nccl'"},
                      {{"--timeout", "0"}, "--timeout"},
                      {{"--bogus"}, "unrecognized arguments: --bogus"},
                      {{"--build-dir", "/nonexistent/build"}, "no such directory"}});
}

}  // namespace
