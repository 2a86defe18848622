// sparcoll-run, driven as a user would: real processes (sh -c), real pipes, real signals.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "control/store.hpp"
#include "launch_util.hpp"

extern char** environ;

namespace {

using sparcoll::testing::launch;
using sparcoll::testing::launcher_path;
using sparcoll::testing::Launcher;
using sparcoll::testing::LaunchResult;
using Clock = std::chrono::steady_clock;

// "[2] text", the way the launcher prefixes rank 2's lines. Appends instead of operator+, which
// trips g++ 12's false -Wrestrict warning (GCC bug 105329).
std::string rank_line(int rank, const std::string& text) {
  std::string line = "[";
  line += std::to_string(rank);
  line += "] ";
  line += text;
  return line;
}

std::vector<std::string> sorted_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::sort(lines.begin(), lines.end());
  return lines;
}

TEST(LauncherTest, EveryRankGetsItsEnvironment) {
  LaunchResult r = launch({"-n", "3", "--transport", "tcp", "--env", "FOO=a=b", "--env", "BAR=", "--", "sh", "-c",
                           "echo $SPARCOLL_RANK $SPARCOLL_WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE "
                           "$SPARCOLL_STORE_SERVER $SPARCOLL_AGGREGATORS $SPARCOLL_TRANSPORT $FOO "
                           "${BAR-unset}. ${SPARCOLL_ROLE-norole}"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(sorted_lines(r.out), (std::vector<std::string>{"[0] 0 3 0 3 external 0 tcp a=b . norole",
                                                           "[1] 1 3 1 3 external 0 tcp a=b . norole",
                                                           "[2] 2 3 2 3 external 0 tcp a=b . norole"}));
  EXPECT_EQ(r.err, "");
}

TEST(LauncherTest, RanksShareStoreAddressAndRandomToken) {
  LaunchResult r = launch({"-n", "4", "--", "sh", "-c", "echo $SPARCOLL_STORE $SPARCOLL_JOB_TOKEN"},
                          {"SPARCOLL_JOB_TOKEN="});  // empty counts as unset
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> lines = sorted_lines(r.out);
  ASSERT_EQ(lines.size(), 4u);
  std::smatch first;
  ASSERT_TRUE(std::regex_match(lines[0], first, std::regex(R"(\[0\] (127\.0\.0\.1:[0-9]+ [0-9a-f]{32}))")))
      << lines[0];
  for (int i = 1; i < 4; ++i) EXPECT_EQ(lines[i], rank_line(i, first[1].str()));

  LaunchResult again = launch({"-n", "1", "--", "sh", "-c", "echo $SPARCOLL_STORE $SPARCOLL_JOB_TOKEN"});
  EXPECT_NE(again.out.substr(again.out.find(' ', 4)), lines[0].substr(lines[0].find(' ', 4)))
      << "two jobs drew the same token";
}

TEST(LauncherTest, HostsTheStoreUnderTheInheritedToken) {
  std::string done =
      std::filesystem::temp_directory_path() / ("sparcoll-launcher-test-" + std::to_string(getpid()));
  std::filesystem::remove(done);
  Launcher launcher({"-n", "2", "--", "sh", "-c",
                     "echo store=$SPARCOLL_STORE token=$SPARCOLL_JOB_TOKEN.; "
                     "while [ ! -e " + done + " ]; do sleep 0.02; done"},
                    {"SPARCOLL_JOB_TOKEN=launcher-test-token"});
  ASSERT_TRUE(launcher.wait_for_output("\n", 2)) << launcher.out();
  std::smatch match;
  std::string out = launcher.out();
  ASSERT_TRUE(std::regex_search(out, match, std::regex(R"(store=(\S+) token=launcher-test-token\.)"))) << out;

  // The ranks are still running, so the launcher's store must be serving.
  std::unique_ptr<sparcoll::control::Store> store;
  sparcoll::Status st =
      sparcoll::control::Store::connect(match[1].str(), "launcher-test-token", "launcher test", 5000, &store);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_TRUE(store->set("launcher-test-key", "v").ok());
  std::string value;
  ASSERT_TRUE(store->get("launcher-test-key", 5000, &value).ok());
  EXPECT_EQ(value, "v");

  { std::ofstream touch(done); }
  LaunchResult r = launcher.finish();
  std::filesystem::remove(done);
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(LauncherTest, PrefixesStdoutAndStderrSeparately) {
  LaunchResult r = launch({"-n", "2", "--", "sh", "-c",
                           "echo out$SPARCOLL_RANK; echo err$SPARCOLL_RANK >&2; printf tail$SPARCOLL_RANK"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // A partial last line is flushed at exit, completed with a newline.
  EXPECT_EQ(sorted_lines(r.out), (std::vector<std::string>{"[0] out0", "[0] tail0", "[1] out1", "[1] tail1"}));
  EXPECT_EQ(sorted_lines(r.err), (std::vector<std::string>{"[0] err0", "[1] err1"}));
  EXPECT_EQ(r.out.back(), '\n');
}

TEST(LauncherTest, NoPrefixPassesOutputUnchanged) {
  LaunchResult r = launch({"-n", "1", "--no-prefix", "--", "sh", "-c", "echo line; printf tail"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "line\ntail");
}

TEST(LauncherTest, ManyRanksAllSucceed) {
  LaunchResult r = launch({"-n", "64", "--", "sh", "-c", "echo rank $SPARCOLL_RANK"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> lines = sorted_lines(r.out);
  ASSERT_EQ(lines.size(), 64u);
  for (int i = 0; i < 64; ++i)
    EXPECT_NE(std::find(lines.begin(), lines.end(), rank_line(i, "rank " + std::to_string(i))), lines.end());
}

TEST(LauncherTest, FirstFailureCodeWinsAndStopsTheOthers) {
  LaunchResult r = launch({"-n", "4", "--", "sh", "-c",
                           "if [ $SPARCOLL_RANK = 2 ]; then echo bye >&2; exit 3; fi; sleep 30"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("[2] bye\nsparcoll-run: rank 2 exited with code 3\n"), std::string::npos) << r.err;
  EXPECT_LT(r.seconds, 5.0) << "the sleeping ranks were not stopped";
}

TEST(LauncherTest, DeathBySignalGives128PlusSignal) {
  LaunchResult r = launch({"-n", "3", "--", "sh", "-c", "if [ $SPARCOLL_RANK = 1 ]; then kill -9 $$; fi; sleep 30"});
  EXPECT_EQ(r.exit_code, 128 + SIGKILL);
  EXPECT_NE(r.err.find("sparcoll-run: rank 1 killed by signal 9 (sigkill)\n"), std::string::npos) << r.err;
  EXPECT_LT(r.seconds, 5.0);
}

TEST(LauncherTest, RankIgnoringSigtermIsKilledAfterTheGrace) {
  // Rank 1 ignores SIGTERM (and so does its sleep, which inherits that): only SIGKILL stops it.
  LaunchResult r = launch({"-n", "2", "--", "sh", "-c",
                           "if [ $SPARCOLL_RANK = 0 ]; then sleep 0.2; exit 1; fi; trap '' TERM; sleep 30"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("sparcoll-run: rank 0 exited with code 1\n"), std::string::npos) << r.err;
  EXPECT_LT(r.seconds, 10.0);
}

TEST(LauncherTest, TimeoutKillsEverythingAndNamesWhatWasRunning) {
  LaunchResult r = launch({"-n", "4", "--timeout", "0.5", "--", "sh", "-c",
                           "if [ $SPARCOLL_RANK = 2 ]; then exit 0; fi; sleep 30"});
  EXPECT_EQ(r.exit_code, 124);
  EXPECT_NE(r.err.find("sparcoll-run: timed out after 0.5 s; still running: rank 0, rank 1, rank 3\n"),
            std::string::npos)
      << r.err;
  EXPECT_LT(r.seconds, 5.0);
}

TEST(LauncherTest, SigintIsForwardedToEveryRank) {
  Launcher launcher({"-n", "2", "--", "sh", "-c",
                     "trap 'echo caught $SPARCOLL_RANK; exit 5' INT; echo ready; "
                     "while :; do sleep 0.02; done"});
  ASSERT_TRUE(launcher.wait_for_output("ready", 2)) << launcher.out();
  kill(launcher.pid(), SIGINT);
  LaunchResult r = launcher.finish();
  EXPECT_EQ(r.exit_code, 128 + SIGINT);
  EXPECT_NE(r.out.find("[0] caught 0\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[1] caught 1\n"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("sparcoll-run: got sigint; forwarding it to every process\n"), std::string::npos) << r.err;
}

TEST(LauncherTest, BadUsageExitsTwoWithUsage) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const Case cases[] = {
      {{"--", "true"}, "missing -n N"},
      {{"-n", "0", "--", "true"}, "-n 0: expected a number of ranks from 1 to 1024"},
      {{"-n", "1025", "--", "true"}, "-n 1025: expected"},
      {{"-n", "2x", "--", "true"}, "-n 2x: expected"},
      {{"-n", "2", "true"}, "unexpected argument true (the program goes after --)"},
      {{"-n", "2"}, "missing -- before the program"},
      {{"-n", "2", "--"}, "missing program after --"},
      {{"-n", "2", "--frobnicate", "--", "true"}, "unknown option --frobnicate"},
      {{"-n", "2", "--timeout", "-1", "--", "true"}, "--timeout -1: expected a positive number of seconds"},
      {{"-n", "2", "--env", "NOEQUALS", "--", "true"}, "--env NOEQUALS: expected KEY=VALUE"},
      {{"-n", "2", "--env", "SPARCOLL_RANK=1", "--", "true"}, "--env SPARCOLL_RANK: sparcoll-run sets this"},
      {{"-n", "2", "--", "sparcoll-no-such-program"}, "program sparcoll-no-such-program not found in PATH"},
      {{"-n", "2", "--", "/etc"}, "program /etc is not an executable file"},
      {{"-n"}, "-n needs a value"},
  };
  for (const Case& c : cases) {
    LaunchResult r = launch(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.message;
    EXPECT_NE(r.err.find("sparcoll-run: " + c.message), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("usage: sparcoll-run -n N"), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
  }
}

TEST(LauncherTest, HelpGoesToStdout) {
  LaunchResult r = launch({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out.rfind("usage: sparcoll-run -n N", 0), 0u) << r.out;
}

}  // namespace
