#include "proc_stats.hpp"

#include <dirent.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

namespace sparcoll::soak {

namespace {

std::string proc_path(pid_t pid, const char* leaf) {
  return pid == 0 ? std::string("/proc/self/") + leaf : "/proc/" + std::to_string(pid) + "/" + leaf;
}

// Entries of a /proc directory (fd, task), or -1. `own` = 1 when listing /proc/self/fd, whose
// listing holds the descriptor opendir() itself took.
std::int64_t count_entries(const std::string& dir, int own) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return -1;
  std::int64_t n = 0;
  while (const dirent* e = readdir(d))
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n - own;
}

std::int64_t count_lines(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "re");
  if (f == nullptr) return -1;
  std::int64_t n = 0;
  char buffer[65536];
  std::size_t got;
  while ((got = std::fread(buffer, 1, sizeof buffer, f)) > 0) n += std::count(buffer, buffer + got, '\n');
  std::fclose(f);
  return n;
}

ProcStats read(pid_t pid) {
  ProcStats s;
  // statm: size resident shared text lib data dt, in pages.
  if (std::FILE* f = std::fopen(proc_path(pid, "statm").c_str(), "re")) {
    long long size = 0, resident = 0;
    if (std::fscanf(f, "%lld %lld", &size, &resident) == 2) s.rss_kib = resident * (sysconf(_SC_PAGESIZE) / 1024);
    std::fclose(f);
  }
  s.fds = count_entries(proc_path(pid, "fd"), pid == 0 ? 1 : 0);
  s.threads = count_entries(proc_path(pid, "task"), 0);
  s.maps = count_lines(proc_path(pid, "maps"));
  return s;
}

// The value of one variable in /proc/PID/environ, empty if absent or unreadable.
std::string environ_value(pid_t pid, const std::string& name) {
  std::ifstream in(proc_path(pid, "environ"), std::ios::binary);
  std::string entry;
  while (std::getline(in, entry, '\0'))
    if (entry.compare(0, name.size() + 1, name + "=") == 0) return entry.substr(name.size() + 1);
  return std::string();
}

}  // namespace

ProcStats read_self() {
  ProcStats s = read(0);
  const struct mallinfo2 m = mallinfo2();
  s.heap_kib = static_cast<std::int64_t>((m.uordblks + m.hblkhd) / 1024);
  return s;
}
ProcStats read_process(pid_t pid) { return read(pid); }

std::vector<Sibling> find_sibling_aggregators() {
  std::vector<Sibling> found;
  const pid_t parent = getppid();
  DIR* d = opendir("/proc");
  if (d == nullptr) return found;
  while (const dirent* e = readdir(d)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    std::ifstream in("/proc/" + std::string(e->d_name) + "/stat");
    std::string stat;
    std::getline(in, stat);
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split at the last ')'.
    const auto open = stat.find('('), close = stat.rfind(')');
    if (open == std::string::npos || close == std::string::npos || close < open) continue;
    const std::string comm = stat.substr(open + 1, close - open - 1);
    std::istringstream rest(stat.substr(close + 1));
    char state = 0;
    long ppid = 0;
    rest >> state >> ppid;
    // The kernel keeps 15 characters of the name: "sparcoll-aggreg".
    if (ppid != parent || std::string("sparcoll-aggregator").rfind(comm, 0) != 0 || comm.size() < 15) continue;
    const std::string index = environ_value(static_cast<pid_t>(pid), "SPARCOLL_AGGREGATOR_INDEX");
    found.push_back({index.empty() ? -1 : std::atoi(index.c_str()), static_cast<pid_t>(pid)});
  }
  closedir(d);
  std::sort(found.begin(), found.end(), [](const Sibling& a, const Sibling& b) { return a.index < b.index; });
  return found;
}

CpuTimes read_cpu_times() {
  CpuTimes t;
  std::ifstream in("/proc/stat");
  std::string label;
  in >> label;
  if (label != "cpu") return t;
  // user nice system idle iowait irq softirq steal (guest and guest_nice are inside user/nice).
  for (int i = 0; i < 8; ++i) {
    std::uint64_t v = 0;
    if (!(in >> v)) break;
    t.total += v;
    if (i == 7) t.steal = v;
  }
  return t;
}

double steal_percent(const CpuTimes& from, const CpuTimes& to) {
  if (to.total <= from.total) return 0;
  return 100.0 * static_cast<double>(to.steal - from.steal) / static_cast<double>(to.total - from.total);
}

double load_average_1min() {
  double load = -1;
  if (std::FILE* f = std::fopen("/proc/loadavg", "re")) {
    if (std::fscanf(f, "%lf", &load) != 1) load = -1;
    std::fclose(f);
  }
  return load;
}

}  // namespace sparcoll::soak
