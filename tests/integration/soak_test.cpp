// The soak (perf/soak/main.cpp) in short, so that a leak comes back as a failing test: 2 000 mixed
// collectives of at most 1 MiB (every kind, algorithm, dtype and op, non-blocking batches, bad
// calls) and 50 communicator create/destroy cycles on 2 ranks, over shm and tcp. Nothing is timed:
// it fails on a wrong result, results that differ between ranks, RSS growing past 8 MiB or
// malloc's bytes in use past 4 MiB after warm-up, or descriptors or threads that change.
#include <string>

#include <gtest/gtest.h>

#include "launch_util.hpp"

namespace {

using sparcoll::testing::build_path;
using sparcoll::testing::launch;
using sparcoll::testing::LaunchResult;

class SoakShort : public ::testing::TestWithParam<std::string> {};

TEST_P(SoakShort, MixedCollectivesAndCyclesLeakNothing) {
  // --warmup 0.25: the baseline after 500 ops, when every buffer size has been through once.
  // With 1 MiB tensors the library's kept buffers are small: malloc's bytes in use may grow by
  // 8 MiB flat, not 5% (about 10 MiB here). 8, not 4: the aggregators' pool of lane buffers grows
  // to the most lanes ever in flight at once, which the batches may first reach after warm-up,
  // and with 32-block windows a lane's two buffers are 128 KiB at 2 ranks (one more op's 32
  // lanes: 4 MiB; a run at 4 MiB flat failed at +4.5, flat from op 900 on).
  const LaunchResult r =
      launch({"-n", "2", "--transport", GetParam(), "--timeout", "150", "--", build_path("perf/sparcoll-soak"), "--ops",
              "2000", "--max-bytes", "1M", "--cycles", "50", "--warmup", "0.25", "--sample-every", "100",
              "--heap-limit-percent", "0", "--heap-limit-mib", "8"},
             {}, std::chrono::seconds(170));
  EXPECT_EQ(r.exit_code, 0) << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
  EXPECT_NE(r.out.find("sparcoll-soak: ok:"), std::string::npos) << r.out;
}

INSTANTIATE_TEST_SUITE_P(Soak, SoakShort, ::testing::Values("shm", "tcp"));

}  // namespace
