// Hostile peers against a real running job: a stranger without the job token attacks every TCP
// port the job listens on (the store, the tcp data ports while they set up) for as long as the
// job runs, with garbage, a 4 GiB length prefix, half frames, a slowloris, a flood of silent
// connections, wrong and empty tokens and forged identities (hostile_peer.cpp). The job must
// finish on time, with every element exact (docs/security.md). The tcp data ports listen only
// for the milliseconds of setup, so here the store takes nearly every attack; the listeners are
// attacked in-process in the middle of their setup by tests/drivers/tcp_driver_test.cpp.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../control/store_test_util.hpp"
#include "launch_util.hpp"

namespace {

using sparcoll::control::test::unused_port;
using sparcoll::testing::build_path;
using sparcoll::testing::LaunchResult;
using sparcoll::testing::Launcher;

// sparcoll-perf's result rows ("  sparcoll block_sparse ... #wrong"): every one must end in 0.
void expect_exact_rows(const std::string& out) {
  std::istringstream lines(out);
  int rows = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.find(" sparcoll ") == std::string::npos || line.find('#') != std::string::npos) continue;
    ++rows;
    EXPECT_EQ(line.substr(line.find_last_not_of(' ')), "0") << "wrong elements: " << line;
  }
  EXPECT_GT(rows, 0) << "no result row:\n" << out;
}

// The attacker's count ("hostile: N attacks on P ports"), or -1.
long attacks(const std::string& out) {
  const std::size_t at = out.find("hostile: ");
  return at == std::string::npos ? -1 : std::strtol(out.c_str() + at + 9, nullptr, 10);
}

// Each of the attacker's 9 kinds of attack at least 5 times.
constexpr long kEnoughAttacks = 45;

// A job that runs for about `seconds` of allreduces however fast or slow they are, so the
// attacker gets kEnoughAttacks in. A fixed count ran out first once allreduces of this size
// started running in the calling thread; a floor of 20000 took 107-140 s on a host with two busy
// loops (2.4-5 ms an allreduce: every message waits for a busy loop's time slice to end). The
// attacker makes one attack per scan of /proc, 25-35 a second on a loaded host, and the budget
// sizes the run from the warm-up, so a job meant to last 6 s has lasted 1.7 s (86 attacks).
std::vector<std::string> perf_args_for(const char* seconds) {
  return {build_path("perf/sparcoll-perf"), "--elements", "65536", "--density", "0.1", "--iters", "1000000",
          "--min-iters", "100", "--time-budget", seconds, "--warmup", "10", "--check"};
}

// Runs `job(seconds)`, a job under attack that returns how many attacks the attacker made, with
// a 6 s budget, and once more with 12 s when that was fewer than kEnoughAttacks: the attacker
// makes one attack per scan of /proc, and on a host busy with other tests it made 29 in a 2.8 s
// job. Too few attacks prove nothing either way, so that first run is no verdict.
void run_under_enough_attacks(const std::function<long(const char* seconds)>& job) {
  const long first = job("6");
  if (first >= kEnoughAttacks) return;
  std::printf("hostile: only %ld attacks in a 6 s job; running it again for 12 s\n", first);
  EXPECT_GE(job("12"), kEnoughAttacks) << "too few attacks to mean anything, in a 12 s job too";
}

// The reproduction: one wrong-token hello to the launcher's store ended this job
// ("aggregator 0 exited with code 1"), 4 times in 4.
TEST(Hostile, AJobUnderAttackWithADedicatedAggregatorFinishesExact) {
  run_under_enough_attacks([](const char* seconds) {
    std::vector<std::string> args = {"-n", "2", "--aggregators", "1", "--transport", "tcp", "--timeout", "120", "--"};
    for (const std::string& a : perf_args_for(seconds)) args.push_back(a);
    Launcher job(args, {}, std::chrono::seconds(150));
    Launcher attacker({build_path("tests/integration/sparcoll-hostile-peer"), std::to_string(job.pid())}, {},
                      std::chrono::seconds(160), true);
    const LaunchResult r = job.finish();
    const LaunchResult a = attacker.finish();
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    expect_exact_rows(r.out);
    // Rate-limited: the job's log is not a stranger's megaphone.
    EXPECT_LT(std::count(r.err.begin(), r.err.end(), '\n'), 40) << r.err.substr(0, 4000);
    std::printf("%s", a.out.c_str());
    return attacks(a.out);
  });
}

// Rank 0 hosts the store in the training process itself (torchrun, mpirun, plain variables).
TEST(Hostile, AJobWhoseRank0HostsTheStoreFinishesExactUnderAttack) {
  for (const char* transport : {"shm", "tcp"}) {
    SCOPED_TRACE(transport);
    run_under_enough_attacks([transport](const char* seconds) {
      const std::string store = "127.0.0.1:" + std::to_string(unused_port());
      std::vector<std::unique_ptr<Launcher>> owned;
      for (int rank = 0; rank < 2; ++rank) {
        owned.push_back(std::make_unique<Launcher>(
            perf_args_for(seconds),
            std::vector<std::string>{"SPARCOLL_RANK=" + std::to_string(rank), "SPARCOLL_WORLD_SIZE=2",
                                     "SPARCOLL_STORE=" + store, "SPARCOLL_JOB_TOKEN=a-secret-the-attacker-lacks",
                                     std::string("SPARCOLL_TRANSPORT=") + transport},
            std::chrono::seconds(150), true));
      }
      Launcher attacker({build_path("tests/integration/sparcoll-hostile-peer"), std::to_string(owned[0]->pid())}, {},
                        std::chrono::seconds(160), true);
      for (auto& rank : owned) {
        const LaunchResult r = rank->finish();
        EXPECT_EQ(r.exit_code, 0) << transport << ":\n" << r.out << r.err;
        if (&rank == &owned[0]) expect_exact_rows(r.out);
      }
      const LaunchResult a = attacker.finish();
      std::printf("%s: %s", transport, a.out.c_str());
      return attacks(a.out);
    });
  }
}

}  // namespace
