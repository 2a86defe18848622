// The C API from a C program under sparcoll-run, on both transports and 1..3 ranks.
#include <gtest/gtest.h>

#include "launch_util.hpp"

namespace {

using sparcoll::testing::build_path;
using sparcoll::testing::launch;

class CApi : public ::testing::TestWithParam<std::tuple<int, std::string>> {};

TEST_P(CApi, SumsReportsErrorsAndSurvivesThem) {
  const auto& [ranks, transport] = GetParam();
  const auto r = launch({"-n", std::to_string(ranks), "--transport", transport, "--timeout", "60", "--",
                         build_path("tests/integration/sparcoll-c-check")},
                        {}, std::chrono::seconds(90));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  std::size_t oks = 0;
  for (std::size_t at = r.out.find("c-api: ok"); at != std::string::npos; at = r.out.find("c-api: ok", at + 1)) ++oks;
  EXPECT_EQ(oks, static_cast<std::size_t>(ranks)) << r.out;
}

INSTANTIATE_TEST_SUITE_P(Api, CApi, ::testing::Combine(::testing::Values(1, 3), ::testing::Values("shm", "tcp")));

class TwoCommunicators : public ::testing::TestWithParam<std::string> {};

TEST_P(TwoCommunicators, LiveAtOnceWithOpsInFlightOnBoth) {
  const auto r = launch({"-n", "3", "--transport", GetParam(), "--timeout", "60", "--",
                         build_path("tests/integration/sparcoll-two-comms")},
                        {}, std::chrono::seconds(90));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  std::size_t oks = 0;
  for (std::size_t at = r.out.find("two-comms: ok"); at != std::string::npos; at = r.out.find("two-comms: ok", at + 1)) ++oks;
  EXPECT_EQ(oks, 3u) << r.out;
}

INSTANTIATE_TEST_SUITE_P(Api, TwoCommunicators, ::testing::Values("shm", "tcp"));

}  // namespace
