// The launcher's event loop: forwards the children's output, reaps them, and applies the failure
// rules of docs/launcher.md (first failure wins, the others get SIGTERM then SIGKILL; timeout;
// aggregators that outlive the ranks; forwarded SIGINT/SIGTERM/SIGHUP). One thread, one poll().
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tools/run_child.hpp"
#include "tools/run_identity.hpp"
#include "tools/run_output.hpp"
#include "tools/run_signals.hpp"

namespace sparcoll::run {

struct SupervisorLimits {
  double timeout_s = 0;  // 0: none
  std::chrono::milliseconds kill_grace{2000};          // SIGTERM to SIGKILL
  std::chrono::milliseconds aggregator_linger{10000};  // after the last rank exited 0
};

class Supervisor {
 public:
  using Clock = std::chrono::steady_clock;

  Supervisor(LauncherSignals* signals, SupervisorLimits limits, bool prefix);

  // Takes ownership of a started child's pipes.
  void add(const ChildIdentity& who, const SpawnedChild& child);
  // Records a launcher-side failure (a child that could not be started) as if a child had failed.
  void fail(const std::string& message, int exit_code);
  // Runs until every child has been reaped; returns the launcher's exit code.
  int run();

 private:
  struct Stream {
    int fd;  // -1 once closed
    LineForwarder forwarder;
  };
  struct Child {
    Child(const ChildIdentity& who, const SpawnedChild& spawned, const std::string& prefix)
        : who(who),
          pid(spawned.pid),
          streams{{spawned.stdout_fd, LineForwarder(1, prefix)}, {spawned.stderr_fd, LineForwarder(2, prefix)}} {}

    ChildIdentity who;
    pid_t pid;
    bool running = true;
    Stream streams[2];  // the child's stdout and stderr, forwarded to ours
  };

  void read_stream(Stream* stream);
  void drain_streams(Child* child);
  void on_signals();
  void on_exit(Child* child, int wait_status);
  void check_deadlines();
  void begin_termination();
  void signal_running(int sig);
  std::optional<Clock::time_point> next_deadline() const;
  std::string running_names(bool aggregators_only) const;
  bool ranks_running() const;
  bool any_running() const;

  LauncherSignals* signals_;
  SupervisorLimits limits_;
  bool prefix_;
  std::vector<Child> children_;
  std::unordered_map<pid_t, std::size_t> by_pid_;
  std::optional<int> exit_code_;  // set by the first failure
  bool terminating_ = false;      // the children were told to stop; their exits are not failures
  bool forwarded_signal_ = false;
  std::optional<Clock::time_point> job_deadline_;
  std::optional<Clock::time_point> kill_deadline_;
  std::optional<Clock::time_point> linger_deadline_;
};

}  // namespace sparcoll::run
