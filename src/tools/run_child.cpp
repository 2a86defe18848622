#include "tools/run_child.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace sparcoll::run {
namespace {

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  pointers.reserve(strings.size() + 1);
  for (const std::string& s : strings) pointers.push_back(const_cast<char*>(s.c_str()));
  pointers.push_back(nullptr);
  return pointers;
}

// Reports errno through the status pipe and exits; async-signal-safe.
[[noreturn]] void child_fail(int status_fd) {
  int error = errno;
  ssize_t ignored = write(status_fd, &error, sizeof error);
  (void)ignored;
  _exit(127);
}

// Runs in the forked child: only async-signal-safe calls, since the store server's thread may
// have held a lock (malloc's, say) at the moment of the fork.
[[noreturn]] void exec_child(const char* path, char* const* argv, char* const* envp, const ChildSetup& setup,
                             pid_t launcher, int stdin_fd, int stdout_fd, int stderr_fd, int status_fd) {
  setpgid(0, 0);
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) child_fail(status_fd);
  // The launcher may have died before prctl took effect; then no signal would ever come.
  if (getppid() != launcher) _exit(127);
  if (dup2(stdin_fd, STDIN_FILENO) < 0 || dup2(stdout_fd, STDOUT_FILENO) < 0 || dup2(stderr_fd, STDERR_FILENO) < 0)
    child_fail(status_fd);
  // An ignored SIGPIPE survives exec; the program should get the default it expects.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGPIPE, &dfl, nullptr);
  sigprocmask(SIG_SETMASK, &setup.signal_mask, nullptr);
  setrlimit(RLIMIT_NOFILE, &setup.open_files);
  execve(path, argv, envp);
  child_fail(status_fd);
}

void close_all(std::initializer_list<int> fds) {
  for (int fd : fds)
    if (fd >= 0) close(fd);
}

}  // namespace

Status spawn_child(const std::string& path, const std::vector<std::string>& argv, const std::vector<std::string>& env,
                   const ChildSetup& setup, SpawnedChild* out) {
  // Everything the child needs is built before fork: it must not allocate.
  std::vector<char*> argv_ptrs = c_strings(argv);
  std::vector<char*> env_ptrs = c_strings(env);
  int out_pipe[2] = {-1, -1};
  int err_pipe[2] = {-1, -1};
  int status_pipe[2] = {-1, -1};
  int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0 || pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0 ||
      pipe2(status_pipe, O_CLOEXEC) != 0) {
    Status status(ErrorCode::system_error, std::string("pipes for ") + path + ": " + std::strerror(errno));
    close_all({null_fd, out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1], status_pipe[0], status_pipe[1]});
    return status;
  }
  pid_t launcher = getpid();
  pid_t pid = fork();
  if (pid == 0)
    exec_child(path.c_str(), argv_ptrs.data(), env_ptrs.data(), setup, launcher, null_fd, out_pipe[1], err_pipe[1],
               status_pipe[1]);
  int fork_errno = errno;
  close_all({null_fd, out_pipe[1], err_pipe[1], status_pipe[1]});
  if (pid < 0) {
    close_all({out_pipe[0], err_pipe[0], status_pipe[0]});
    return Status(ErrorCode::system_error, "fork for " + path + ": " + std::strerror(fork_errno));
  }
  // Also set here: a kill(-pid) right after we return must reach the group even if the child
  // has not run yet. EACCES after the child's exec is harmless (it already did it).
  setpgid(pid, pid);

  // EOF on the status pipe means exec succeeded (close-on-exec closed it); an int is its errno.
  int child_errno = 0;
  ssize_t n;
  do {
    n = read(status_pipe[0], &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  close(status_pipe[0]);
  if (n > 0) {
    waitpid(pid, nullptr, 0);
    close_all({out_pipe[0], err_pipe[0]});
    return Status(ErrorCode::system_error, "cannot execute " + path + ": " + std::strerror(child_errno));
  }
  fcntl(out_pipe[0], F_SETFL, O_NONBLOCK);
  fcntl(err_pipe[0], F_SETFL, O_NONBLOCK);
  out->pid = pid;
  out->stdout_fd = out_pipe[0];
  out->stderr_fd = err_pipe[0];
  return Status::Ok();
}

}  // namespace sparcoll::run
