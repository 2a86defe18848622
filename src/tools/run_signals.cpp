#include "tools/run_signals.hpp"

#include <sys/signalfd.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>

namespace sparcoll::run {

Status LauncherSignals::create(std::unique_ptr<LauncherSignals>* out) {
  sigset_t handled;
  sigemptyset(&handled);
  sigaddset(&handled, SIGCHLD);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    // A signal we were started with ignored (nohup, a shell's background job) stays ignored, for
    // us and for the children: blocking it would make the kernel queue it again.
    struct sigaction current {};
    if (sigaction(sig, nullptr, &current) == 0 && current.sa_handler == SIG_IGN) continue;
    sigaddset(&handled, sig);
  }
  sigset_t original;
  if (sigprocmask(SIG_BLOCK, &handled, &original) != 0)
    return Status(ErrorCode::system_error, std::string("sigprocmask: ") + std::strerror(errno));
  int fd = signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK);
  if (fd < 0) {
    Status status(ErrorCode::system_error, std::string("signalfd: ") + std::strerror(errno));
    sigprocmask(SIG_SETMASK, &original, nullptr);
    return status;
  }
  signal(SIGPIPE, SIG_IGN);
  out->reset(new LauncherSignals(fd, original));
  return Status::Ok();
}

LauncherSignals::~LauncherSignals() { close(fd_); }

std::vector<int> LauncherSignals::read_pending() {
  std::vector<int> signals;
  signalfd_siginfo info[16];
  while (true) {
    ssize_t n = read(fd_, info, sizeof info);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EAGAIN: nothing more pending
    for (std::size_t i = 0; i < static_cast<std::size_t>(n) / sizeof info[0]; ++i)
      signals.push_back(static_cast<int>(info[i].ssi_signo));
  }
  return signals;
}

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  if (!abbrev) return "signal " + std::to_string(sig);
  std::string name = "sig";
  for (const char* c = abbrev; *c; ++c) name += static_cast<char>(std::tolower(static_cast<unsigned char>(*c)));
  return name;
}

}  // namespace sparcoll::run
