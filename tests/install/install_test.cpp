// `meson install` end to end (install_check.sh): the installed headers, library, sparcoll.pc and
// tools are enough to build a C and a C++ program through pkg-config and run them as 2-process
// jobs. Also sparcoll_comm_init in the build tree, over shm and tcp.
#include <stdlib.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "../control/store_test_util.hpp"
#include "../integration/launch_util.hpp"

namespace {

using sparcoll::control::test::unused_port;
using sparcoll::testing::build_path;
using sparcoll::testing::LaunchResult;
using sparcoll::testing::Launcher;
using sparcoll::testing::run_program;
using sparcoll::testing::source_path;

TEST(Install, BuildsAndRunsProgramsThroughPkgConfig) {
  for (const char* tool : {"meson", "pkg-config", "cc", "c++"}) {
    if (run_program({"/bin/sh", "-c", std::string("command -v ") + tool}).exit_code != 0) {
      GTEST_SKIP() << tool << " is not installed";
    }
  }
  // Outside the build tree, so a flag that names the build tree is caught.
  std::string scratch = (std::filesystem::temp_directory_path() / "sparcoll-install-XXXXXX").string();
  ASSERT_NE(mkdtemp(scratch.data()), nullptr) << "cannot create " << scratch;
  const LaunchResult r = run_program({"/bin/sh", source_path("tests/install/install_check.sh"), SPARCOLL_BUILD_DIR,
                                      scratch, std::to_string(unused_port())},
                                     {}, std::chrono::seconds(150));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("install-check: ok"), std::string::npos) << r.out << r.err;
  std::error_code ignored;
  for (const char* suffix : {"", ".programs", ".install.log"}) std::filesystem::remove_all(scratch + suffix, ignored);
}

// Meson's uninstalled pkg-config file (build/meson-uninstalled): the same C program, built against
// the build tree through it alone (it once named the source root instead of include/, so
// <sparcoll/sparcoll.h> was not found).
TEST(Install, BuildsAndRunsAProgramThroughTheUninstalledPkgConfigFile) {
  for (const char* tool : {"pkg-config", "cc"}) {
    if (run_program({"/bin/sh", "-c", std::string("command -v ") + tool}).exit_code != 0) {
      GTEST_SKIP() << tool << " is not installed";
    }
  }
  std::string scratch = (std::filesystem::temp_directory_path() / "sparcoll-uninstalled-XXXXXX").string();
  ASSERT_NE(mkdtemp(scratch.data()), nullptr) << "cannot create " << scratch;
  const LaunchResult r = run_program({"/bin/sh", source_path("tests/install/uninstalled_check.sh"), SPARCOLL_BUILD_DIR,
                                      scratch, std::to_string(unused_port())},
                                     {}, std::chrono::seconds(120));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("uninstalled-check: ok"), std::string::npos) << r.out << r.err;
  std::error_code ignored;
  std::filesystem::remove_all(scratch, ignored);
}

class CommInit : public ::testing::TestWithParam<std::string> {};

// Two processes, each told its rank and rank 0's store address, as a framework would.
TEST_P(CommInit, TwoRanksFromExplicitRankSizeAndStore) {
  const std::string address = "127.0.0.1:" + std::to_string(unused_port());
  const std::string program = build_path("tests/install/sparcoll-init-check");
  Launcher rank1({program, "1", "2", address, GetParam()}, {}, std::chrono::seconds(60), true);
  Launcher rank0({program, "0", "2", address, GetParam()}, {}, std::chrono::seconds(60), true);
  const LaunchResult r0 = rank0.finish();
  const LaunchResult r1 = rank1.finish();
  EXPECT_EQ(r0.exit_code, 0) << r0.out << r0.err;
  EXPECT_EQ(r1.exit_code, 0) << r1.out << r1.err;
  // The build tree's shared library (the program links it, not the static internals).
  EXPECT_NE(r0.out.find("init-check: ok " + build_path("libsparcoll.so")), std::string::npos) << r0.out;
  EXPECT_NE(r1.out.find("init-check: ok "), std::string::npos) << r1.out;
}

INSTANTIATE_TEST_SUITE_P(Api, CommInit, ::testing::Values("shm", "tcp"));

}  // namespace
