#include "shm_liveness.hpp"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "common/log.hpp"
#include "transport/setup_util.hpp"

namespace sparcoll::transport::shm {

PeerProcesses::~PeerProcesses() {
  for (int fd : fds_)
    if (fd >= 0) close(fd);
}

Status PeerProcesses::open(const DriverContext& ctx) {
  const std::int64_t self_pid = getpid();
  fds_.assign(ctx.peers.size(), -1);
  kill_pids_.assign(ctx.peers.size(), 0);
  for (std::size_t i = 0; i < ctx.peers.size(); ++i) {
    const ProcessInfo& peer = ctx.processes[ctx.peers[i]];
    if (peer.pid <= 0 || peer.pid == self_pid) continue;
    const long fd = syscall(SYS_pidfd_open, static_cast<pid_t>(peer.pid), 0);
    if (fd >= 0) {
      fds_[i] = static_cast<int>(fd);
      continue;
    }
    if (errno == ESRCH)
      return Status(ErrorCode::peer_failure, process_name(ctx, peer.index) + " (pid " + std::to_string(peer.pid) +
                                                 ") is not running");
    SC_LOG_INFO("pidfd_open for %s (pid %lld) failed (%s), watching it with kill(pid, 0)",
                process_name(ctx, peer.index).c_str(), static_cast<long long>(peer.pid), errno_text(errno).c_str());
    kill_pids_[i] = peer.pid;
  }
  return Status::Ok();
}

bool process_exited(const struct pollfd& fd) { return fd.fd >= 0 && (fd.revents & POLLIN) != 0; }

}  // namespace sparcoll::transport::shm
