#include "tcp_congestion.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "common/log.hpp"
#include "transport/setup_util.hpp"

namespace sparcoll::transport::tcp {
namespace {

constexpr std::size_t kNameMax = 16;  // TCP_CA_NAME_MAX of <linux/tcp.h>, the NUL included

std::string current_algorithm(int fd) {
  char name[kNameMax] = {};
  socklen_t len = sizeof name;
  if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len) != 0) return {};
  return std::string(name, strnlen(name, sizeof name));
}

int set_algorithm(int fd, const std::string& name) {
  if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(), static_cast<socklen_t>(name.size())) == 0) return 0;
  return errno;
}

}  // namespace

Status choose_congestion_control(int fd, const std::string& setting, bool peers_local, const std::string& what) {
  if (setting == "system") return Status::Ok();
  if (setting == "auto") {
    // Only a pacing algorithm is replaced, and only towards this host. cubic is Debian's
    // default; an unprivileged process may only pick what net.ipv4.tcp_allowed_congestion_control
    // lists, and reno is always allowed.
    if (!peers_local) return Status::Ok();
    const std::string before = current_algorithm(fd);
    if (before.rfind("bbr", 0) != 0) return Status::Ok();
    for (const char* name : {"cubic", "reno"}) {
      if (set_algorithm(fd, name) == 0) {
        SC_LOG_DEBUG("tcp: %s uses %s instead of the system's %s (SPARCOLL_TCP_CONGESTION=auto: peers on this host)",
                     what.c_str(), name, before.c_str());
        return Status::Ok();
      }
    }
    return Status::Ok();
  }
  if (const int err = set_algorithm(fd, setting); err != 0) {
    const char* hint = err == ENOENT ? " (not loaded: net.ipv4.tcp_available_congestion_control lists the loaded ones)"
                       : err == EPERM ? " (not allowed for this process: net.ipv4.tcp_allowed_congestion_control lists "
                                        "those an unprivileged process may use)"
                                      : "";
    return Status(ErrorCode::invalid_argument, "SPARCOLL_TCP_CONGESTION=" + setting + ": the kernel refused it for " +
                                                   what + ": " + errno_text(err) + hint);
  }
  return Status::Ok();
}

}  // namespace sparcoll::transport::tcp
