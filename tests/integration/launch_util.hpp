// Runs sparcoll-run from a test: real processes, stdout and stderr captured, a watchdog that
// fails the test instead of hanging it. Shared by the integration suites.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sanitizer_report.hpp"

extern char** environ;

namespace sparcoll::testing {

using Clock = std::chrono::steady_clock;

inline std::string launcher_path() { return std::string(SPARCOLL_BUILD_DIR) + "/src/tools/sparcoll-run"; }

struct LaunchResult {
  int exit_code = -1;  // 128+signal if the launcher itself was killed
  std::string out;
  std::string err;
  double seconds = 0;
};

// One sparcoll-run process (or, with `as_given`, the program args[0]) with its stdout and stderr
// captured.
class Launcher {
 public:
  explicit Launcher(const std::vector<std::string>& args, const std::vector<std::string>& extra_env = {},
                    std::chrono::seconds watchdog = std::chrono::seconds(20), bool as_given = false)
      : watchdog_(watchdog) {
    std::vector<std::string> argv;
    if (!as_given) argv.push_back(launcher_path());
    argv.insert(argv.end(), args.begin(), args.end());
    for (const std::string& a : argv) command_ += (command_.empty() ? "" : " ") + a;
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) env.emplace_back(*e);
    env.insert(env.end(), extra_env.begin(), extra_env.end());

    int out_pipe[2], err_pipe[2];
    EXPECT_EQ(pipe2(out_pipe, O_CLOEXEC), 0);
    EXPECT_EQ(pipe2(err_pipe, O_CLOEXEC), 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
    // The launcher must see SIGINT/SIGTERM whatever the test runner did with them.
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t defaults, empty;
    sigemptyset(&empty);
    sigemptyset(&defaults);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) sigaddset(&defaults, sig);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setsigmask(&attr, &empty);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    std::vector<char*> argv_ptrs, env_ptrs;
    for (auto& a : argv) argv_ptrs.push_back(a.data());
    argv_ptrs.push_back(nullptr);
    for (auto& e : env) env_ptrs.push_back(e.data());
    env_ptrs.push_back(nullptr);
    started_ = Clock::now();
    EXPECT_EQ(posix_spawn(&pid_, argv[0].c_str(), &actions, &attr, argv_ptrs.data(), env_ptrs.data()), 0)
        << "cannot start " << argv[0];
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    close(out_pipe[1]);
    close(err_pipe[1]);
    fds_[0] = out_pipe[0];
    fds_[1] = err_pipe[0];
  }

  ~Launcher() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    for (int fd : fds_)
      if (fd >= 0) close(fd);
  }

  pid_t pid() const { return pid_; }
  // The launcher's stdout so far.
  const std::string& out() const { return result_.out; }

  // Reads until stdout holds `count` occurrences of `marker`; false at EOF or after the watchdog.
  bool wait_for_output(const std::string& marker, int count = 1) {
    auto deadline = started_ + watchdog_;
    while (occurrences(result_.out, marker) < count) {
      if (!read_some(deadline)) return false;
    }
    return true;
  }

  // Reads both streams to EOF and reaps the launcher.
  LaunchResult finish() {
    auto deadline = started_ + watchdog_;
    while (read_some(deadline)) {
    }
    if (fds_[0] >= 0 || fds_[1] >= 0) {
      ADD_FAILURE() << "sparcoll-run still running after " << watchdog_.count() << " s; killing it";
      kill(pid_, SIGKILL);
    }
    int status = 0;
    waitpid(pid_, &status, 0);
    reaped_ = true;
    result_.seconds = std::chrono::duration<double>(Clock::now() - started_).count();
    result_.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    // A sanitized program's report fails the test even when the test expected the program to
    // fail or ignores its output (scripts/sanitize; sanitizer_report.hpp).
    for (const std::string* stream : {&result_.err, &result_.out}) {
      const std::string report = sanitizer_report(*stream);
      if (!report.empty()) ADD_FAILURE() << "sanitizer report from " << command_.substr(0, 300) << ":\n" << report;
    }
    return result_;
  }

 private:
  static int occurrences(const std::string& text, const std::string& marker) {
    int n = 0;
    for (std::size_t at = text.find(marker); at != std::string::npos; at = text.find(marker, at + 1)) ++n;
    return n;
  }

  // One poll round; false once both streams are at EOF or the deadline passed.
  bool read_some(Clock::time_point deadline) {
    pollfd p[2];
    int count = 0;
    std::string* sinks[2];
    for (int i = 0; i < 2; ++i) {
      if (fds_[i] < 0) continue;
      p[count] = {fds_[i], POLLIN, 0};
      sinks[count++] = i == 0 ? &result_.out : &result_.err;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (count == 0 || left <= 0) return false;
    if (poll(p, count, static_cast<int>(left)) <= 0) return true;
    for (int i = 0; i < count; ++i) {
      if (p[i].revents == 0) continue;
      char buffer[4096];
      ssize_t n = read(p[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<std::size_t>(n));
      } else {
        int* fd = p[i].fd == fds_[0] ? &fds_[0] : &fds_[1];
        close(*fd);
        *fd = -1;
      }
    }
    return true;
  }

  std::string command_;            // for messages
  std::chrono::seconds watchdog_;  // a hung launcher fails the test instead of hanging it
  pid_t pid_ = -1;
  bool reaped_ = false;
  int fds_[2] = {-1, -1};
  Clock::time_point started_;
  LaunchResult result_;
};

inline LaunchResult launch(const std::vector<std::string>& args, const std::vector<std::string>& extra_env = {},
                           std::chrono::seconds watchdog = std::chrono::seconds(20)) {
  return Launcher(args, extra_env, watchdog).finish();
}

// Runs args[0] (a path) with args[1..] directly, not through sparcoll-run.
inline LaunchResult run_program(const std::vector<std::string>& args, const std::vector<std::string>& extra_env = {},
                                std::chrono::seconds watchdog = std::chrono::seconds(20)) {
  return Launcher(args, extra_env, watchdog, true).finish();
}

// A file of the source tree, e.g. source_path("scripts/netns-run").
inline std::string source_path(const std::string& relative) { return std::string(SPARCOLL_SOURCE_DIR) + "/" + relative; }

// A program built into the build tree, e.g. build_path("tests/integration/sparcoll-check").
inline std::string build_path(const std::string& relative) { return std::string(SPARCOLL_BUILD_DIR) + "/" + relative; }

}  // namespace sparcoll::testing
