// Block-sparse allreduce over real verbs. Runs where an RDMA device exists — in CI, inside the
// Soft-RoCE VM (scripts/rxe-vm, see scripts/test.sh) — and is reported skipped elsewhere.
// Matrices are small: the VM emulates its CPU.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "launch_util.hpp"
#include "transport/driver.hpp"

namespace {

using sparcoll::testing::build_path;
using sparcoll::testing::launch;

class AllreduceRdma : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string reason;
    if (!sparcoll::transport::driver_usable("rdma", &reason)) GTEST_SKIP() << "rdma is not usable here: " << reason;
  }

  sparcoll::testing::LaunchResult run(int ranks, int aggregators, const std::vector<std::string>& args,
                                      const std::vector<std::string>& env = {},
                                      const std::string& program = "tests/integration/sparcoll-check") {
    std::vector<std::string> argv = {"-n", std::to_string(ranks), "--transport", "rdma", "--aggregators",
                                     std::to_string(aggregators), "--timeout", "500", "--", build_path(program)};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto r = launch(argv, env, std::chrono::seconds(560));
    EXPECT_EQ(r.exit_code, 0) << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
    EXPECT_NE(r.out.find("cases passed"), std::string::npos) << r.out;
    return r;
  }
};

const std::vector<std::string> kMatrix = {"--sizes", "0,1,257,20001", "--dtypes", "f32,bf16,i32", "--ops", "sum,max",
                                          "--densities", "0,0.01,1", "--patterns", "random,disjoint"};

TEST_F(AllreduceRdma, TwoRanksCoLocated) { run(2, 0, kMatrix); }
TEST_F(AllreduceRdma, FourRanksCoLocated) { run(4, 0, kMatrix); }
TEST_F(AllreduceRdma, ThreeRanksTwoDedicatedAggregators) { run(3, 2, kMatrix); }
TEST_F(AllreduceRdma, EventModeSleepsOnTheCompletionChannel) {
  run(3, 0, {"--sizes", "1,257,20001", "--dtypes", "f32", "--ops", "sum,max", "--densities", "0,0.01,1"},
      {"SPARCOLL_POLL_MODE=event"});
}

// broadcast, allgather, reduce_scatter, reduce, gather, scatter, all_to_all and barrier on the
// collective thread's queue pairs (the driver's last channel), co-located and with dedicated
// aggregators (workers then connect to each other too); the dense ring and butterfly allreduce,
// and send/recv outside collectives, over the same channel.
TEST_F(AllreduceRdma, CollectivesAndDenseAllreduce) {
  const std::vector<std::string> collectives = {"--sizes", "0,1,257,20001", "--dtypes", "f32,bf16,i32",
                                                "--ops",   "sum,max",        "--inflight", "4"};
  run(3, 0, collectives, {}, "tests/integration/sparcoll-check-collectives");
  run(2, 2, {"--sizes", "1,1283", "--dtypes", "f32", "--ops", "sum", "--large", "200003"}, {},
      "tests/integration/sparcoll-check-collectives");
  for (const char* algo : {"ring", "butterfly"})
    run(3, 0, {"--algo", algo, "--sizes", "0,1,257,20001", "--dtypes", "f32,bf16", "--ops", "sum,max", "--densities",
               "0.1,1", "--patterns", "random"});
  run(3, 0, {}, {}, "tests/integration/sparcoll-check-p2p");
}

TEST_F(AllreduceRdma, LargeTensorFourRanks) {
  run(4, 0, {"--sizes", "1000003", "--dtypes", "f32", "--ops", "sum", "--densities", "0.01,1", "--patterns", "random"});
}

// Registered send buffers are read in place by the NIC (the channel logs its first zero-copy
// write at info level); each case registers and deregisters its buffer, so freed and reused
// addresses must never hit a stale registration. Named block_sparse: zero-copy is for the
// block-sparse engine's sends (auto sends these sizes by block recursive doubling or the ring,
// whose messages are built, not the user's bytes).
TEST_F(AllreduceRdma, ZeroCopyFromRegisteredBuffers) {
  const std::vector<std::string> args = {"--register", "--sizes", "257,100003", "--dtypes", "f32,bf16",
                                         "--ops",      "sum",        "--densities", "0.01,1", "--patterns", "random",
                                         "--algo",     "block_sparse"};
  const auto r = run(3, 0, args, {"SPARCOLL_LOG_LEVEL=info"});
  EXPECT_NE(r.err.find("zero-copy write from registered user memory"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("zero-copy is off"), std::string::npos) << r.err;
  run(2, 2, args);  // dedicated aggregators: every block crosses the wire
}

// A registration that fails (what a low `ulimit -l` does) falls back to copying, says why once
// with the hint, and the results stay exact.
TEST_F(AllreduceRdma, ZeroCopyRegistrationFailureFallsBackToCopy) {
  const auto r = run(2, 0, {"--register", "--deny-registration", "--sizes", "257,100003", "--dtypes", "f32,i32", "--ops",
                            "sum", "--densities", "0.01,1", "--patterns", "random", "--algo", "block_sparse"});
  EXPECT_NE(r.err.find("zero-copy is off"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("ulimit -l"), std::string::npos) << r.err;
}

TEST(FaultRdma, DeadPeerIsNamedOverRdma) {
  std::string reason;
  if (!sparcoll::transport::driver_usable("rdma", &reason)) GTEST_SKIP() << "rdma is not usable here: " << reason;
  // Block-sparse, where every survivor waits on rank 1 itself, and the default (the hybrid for
  // this 16 MiB tensor), where a survivor may first see the other survivor, which failed on
  // rank 1 and exited, close its transport: that close names rank 1 as the process it lost.
  for (const char* algo : {"SPARCOLL_ALGO=block_sparse", "SPARCOLL_ALGO=auto"}) {
    const auto r = launch({"-n", "3", "--transport", "rdma", "--timeout", "120", "--",
                           build_path("tests/integration/sparcoll-fault"), "die"},
                          {"SPARCOLL_DEADLINE_MS=20000", algo}, std::chrono::seconds(180));
    EXPECT_EQ(r.exit_code, 0) << algo << "\n" << r.out << r.err;
    EXPECT_NE(r.out.find("rank 1"), std::string::npos) << r.out;
  }
}

}  // namespace
