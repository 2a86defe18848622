// Starting one child of sparcoll-run: its own process group (so a signal reaches everything it
// started), PR_SET_PDEATHSIG(SIGKILL) (so it dies with a killed launcher), stdin from /dev/null,
// stdout and stderr into pipes the launcher reads.
#pragma once

#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "sparcoll/status.hpp"

namespace sparcoll::run {

// What every child restores from the launcher's original state before exec.
struct ChildSetup {
  sigset_t signal_mask;  // LauncherSignals::original_mask()
  rlimit open_files;     // RLIMIT_NOFILE before the launcher raised it for its pipes
};

struct SpawnedChild {
  pid_t pid = -1;  // also the id of the child's process group
  int stdout_fd = -1;  // read ends, non-blocking, close-on-exec
  int stderr_fd = -1;
};

// Forks and execs `path` with `argv` and `env` ("KEY=VALUE"). Returns only after the exec
// happened or failed, so an exec error is reported here (system_error naming the program) and
// no child is left behind in that case.
Status spawn_child(const std::string& path, const std::vector<std::string>& argv, const std::vector<std::string>& env,
                   const ChildSetup& setup, SpawnedChild* out);

}  // namespace sparcoll::run
