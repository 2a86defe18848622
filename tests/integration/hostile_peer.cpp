// sparcoll-hostile-peer PID [--until-gone]: a stranger on the network, for the hostile-peer tests
// (hostile_test.cpp). It finds every IPv4 TCP port that process PID or any of its descendants
// listens on (the launcher's or rank 0's store, the tcp driver's data ports while they set up)
// and attacks each, over and over, without the job token, until PID is gone:
//   garbage, a 4 GiB length prefix, half a frame held open, a slowloris trickle, a flood of
//   silent connections (bounded), hellos with a wrong or empty token, forged identities full of
//   newlines and terminal escapes, and tcp-driver hellos claiming to be rank 0 with a wrong token.
// Prints "hostile: <attacks> attacks on <ports> ports" at the end. What it must not achieve
// (end the job, stall it past its deadline, change a result) the test checks on the job.
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../../drivers/tcp/tcp_wire.hpp"
#include "control/store_wire.hpp"

namespace {

using Clock = std::chrono::steady_clock;

bool alive(pid_t pid) { return kill(pid, 0) == 0; }

// pid and every descendant, from /proc/<p>/stat's parent field.
std::vector<pid_t> family(pid_t root) {
  std::vector<pid_t> all{root};
  std::vector<std::pair<pid_t, pid_t>> parent_of;
  if (DIR* proc = opendir("/proc")) {
    while (const dirent* e = readdir(proc)) {
      const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
      if (pid <= 0) continue;
      std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
      std::string line;
      if (!std::getline(stat, line)) continue;
      const std::size_t close = line.rfind(')');
      if (close == std::string::npos) continue;
      std::istringstream rest(line.substr(close + 2));
      char state = 0;
      pid_t ppid = 0;
      rest >> state >> ppid;
      parent_of.emplace_back(pid, ppid);
    }
    closedir(proc);
  }
  for (std::size_t i = 0; i < all.size(); ++i)
    for (const auto& [pid, ppid] : parent_of)
      if (ppid == all[i]) all.push_back(pid);
  return all;
}

// Socket inodes of the processes, then the local ports of those of them that listen.
std::set<int> listening_ports(const std::vector<pid_t>& pids) {
  std::set<std::string> inodes;
  for (pid_t pid : pids) {
    const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
    DIR* fds = opendir(dir.c_str());
    if (fds == nullptr) continue;
    while (const dirent* e = readdir(fds)) {
      char target[64] = {};
      if (readlink((dir + "/" + e->d_name).c_str(), target, sizeof target - 1) <= 0) continue;
      if (std::strncmp(target, "socket:[", 8) == 0) inodes.insert(std::string(target + 8, std::strlen(target) - 9));
    }
    closedir(fds);
  }
  std::set<int> ports;
  std::ifstream tcp("/proc/net/tcp");
  std::string line;
  std::getline(tcp, line);  // header
  // The file lists every connection, the attacker's own thousands in TIME_WAIT too: sscanf, not a
  // stream per line, keeps a round short.
  while (std::getline(tcp, line)) {
    unsigned port = 0, state = 0;
    unsigned long inode = 0;
    if (std::sscanf(line.c_str(), " %*u: %*x:%x %*x:%*x %x %*x:%*x %*x:%*x %*x %*u %*u %lu", &port, &state,
                    &inode) != 3)
      continue;
    if (state == 0x0A && inodes.count(std::to_string(inode)) != 0) ports.insert(static_cast<int>(port));  // LISTEN
  }
  return ports;
}

int connect_to(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<std::uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0) return fd;
  if (fd >= 0) close(fd);
  return -1;
}

void send_all(int fd, const std::string& bytes) {
  if (fd >= 0) (void)!send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

std::string store_hello(const std::string& token, const std::string& identity) {
  sparcoll::control::wire::Hello hello;
  hello.token = token;
  hello.identity = identity;
  return sparcoll::control::wire::encode(hello);
}

std::string length_prefix(std::uint32_t length) {
  std::string bytes(4, '\0');
  for (int i = 0; i < 4; ++i) bytes[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  return bytes;
}

// Connections an attack keeps open for a while (half frames, slowloris, the flood), closed when
// they are old or too many: the attacker's own descriptors stay bounded.
struct HeldOpen {
  int fd;
  Clock::time_point since;
  bool trickle;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: sparcoll-hostile-peer PID\n");
    return 2;
  }
  const auto target = static_cast<pid_t>(std::atoi(argv[1]));
  std::srand(static_cast<unsigned>(getpid()));
  std::vector<HeldOpen> held;
  std::set<int> attacked;
  long attacks = 0;
  const std::string forged = "rank 1\n  sparcoll block_sparse tcp 0 2 #wrong 0\x1b[2J\x1b[H";
  for (int round = 0; alive(target); ++round) {
    for (int port : listening_ports(family(target))) {
      attacked.insert(port);
      const int kind = (round + port) % 9;
      const int fd = connect_to(port);
      if (fd < 0) continue;
      ++attacks;
      bool keep = false, trickle = false;
      switch (kind) {
        case 0: {  // garbage
          std::string noise(1024, '\0');
          for (char& c : noise) c = static_cast<char>(std::rand());
          send_all(fd, noise);
          break;
        }
        case 1: send_all(fd, length_prefix(0xffffffffu)); break;  // a 4 GiB frame
        case 2:  // half a hello, held open
          send_all(fd, length_prefix(200) + "half a frame");
          keep = true;
          break;
        case 3: keep = trickle = true; break;  // slowloris: a byte now and then
        case 4: send_all(fd, store_hello("not-the-token", "rank 1")); break;
        case 5: send_all(fd, store_hello("", "rank 0")); break;  // no token at all
        case 6: send_all(fd, store_hello("not-the-token", forged)); break;
        case 7: {  // the tcp driver's hello, claiming to be rank 0
          sparcoll::transport::tcp::HandshakeHeader hello;
          hello.process = 0;
          send_all(fd, sparcoll::transport::tcp::encode_handshake(hello, "not-the-token"));
          break;
        }
        case 8:  // a flood of silent connections
          keep = true;
          for (int i = 0; i < 40 && held.size() < 400; ++i) {
            const int extra = connect_to(port);
            if (extra >= 0) held.push_back({extra, Clock::now(), false});
          }
          break;
      }
      if (keep && held.size() < 400) {
        held.push_back({fd, Clock::now(), trickle});
      } else {
        close(fd);
      }
    }
    for (std::size_t i = 0; i < held.size();) {
      if (held[i].trickle) send_all(held[i].fd, std::string(1, 'x'));
      if (Clock::now() - held[i].since > std::chrono::seconds(15)) {
        close(held[i].fd);
        held[i] = held.back();
        held.pop_back();
      } else {
        ++i;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (const HeldOpen& h : held) close(h.fd);
  std::printf("hostile: %ld attacks on %zu ports\n", attacks, attacked.size());
  return 0;
}
