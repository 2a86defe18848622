// What a soak watches in a process, read from /proc: resident memory, open descriptors, threads
// and memory mappings; and the host's load and CPU steal, to say how busy the machine was.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <vector>

namespace sparcoll::soak {

struct ProcStats {
  std::int64_t rss_kib = -1;  // -1: the process could not be read (gone, or not ours)
  std::int64_t fds = -1;
  std::int64_t threads = -1;
  std::int64_t maps = -1;     // lines of /proc/PID/maps: a leaked mapping shows here before RSS does
  // Bytes malloc has handed out and not had back (mallinfo2: arenas + mmapped chunks), this
  // process only: growing with RSS is a leak or a cache that grows; flat while RSS grows is the
  // allocator keeping freed memory (fragmentation, high-water marks).
  std::int64_t heap_kib = -1;
};

// This process. The descriptor used to list /proc/self/fd is not counted.
ProcStats read_self();
// Another process of the same user (an aggregator of the same job).
ProcStats read_process(pid_t pid);

// A dedicated aggregator started by the same sparcoll-run as this rank: a sibling process.
struct Sibling {
  int index = -1;  // SPARCOLL_AGGREGATOR_INDEX
  pid_t pid = 0;
};
// The sparcoll-aggregator processes whose parent is this process's parent, by index.
std::vector<Sibling> find_sibling_aggregators();

// Cumulative CPU time of the host from /proc/stat, in clock ticks.
struct CpuTimes {
  std::uint64_t total = 0;
  std::uint64_t steal = 0;
};
CpuTimes read_cpu_times();
// Percentage of CPU time stolen by the hypervisor between two readings.
double steal_percent(const CpuTimes& from, const CpuTimes& to);
// The 1-minute load average, -1 if unreadable.
double load_average_1min();

}  // namespace sparcoll::soak
