// sparcoll-core-latency: how long one cache line takes to go from one core to another and back.
//
//   sparcoll-core-latency [--cpus A,B] [--round-trips N] [--json]
//
// Two threads, pinned to cpus A and B (default: the first two this process may run on), pass a
// counter back and forth through one cache line, N times (default 200000), and the median of 5
// such runs is printed in nanoseconds per round trip.
//
// Why it is in the perf suite: on a virtual machine the host decides where the guest's vCPUs
// run, and it changes its mind. On the project's 2-vCPU host the round trip was 50-60 ns or
// 190-200 ns for minutes at a time, and 330-590 ns at others (cores that share no cache), and a
// transfer that passes data between processes through a reused buffer with ordinary stores was
// 4-5x slower in the last state: a 2-rank ring allreduce of 16 MiB took 2.0-4.3 ms against
// 12.5-15.5 ms (docs/perf.md, "Two placements of the host"). bench-all records this figure
// before every program it runs, so a table can say which state a point was measured in.
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "sparcoll-core-latency: %s\n"
               "usage: sparcoll-core-latency [--cpus A,B] [--round-trips N] [--json]\n",
               why);
  std::exit(2);
}

// 0, or the error pthread_setaffinity_np returned.
int pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

// The line the two threads pass back and forth: odd values are the first thread's, even ones
// the second's. Aligned so that nothing else shares it.
struct alignas(64) Line {
  std::atomic<std::uint64_t> value{0};
};

// Nanoseconds per round trip of one run; -1 if a thread could not be pinned (*error: why).
double one_run(int cpu_a, int cpu_b, std::uint64_t round_trips, int* error) {
  Line line;
  std::atomic<bool> pinned{true};
  std::atomic<int> pin_error{0};
  std::thread other([&] {
    if (const int e = pin_to(cpu_b); e != 0) {
      pin_error.store(e);
      pinned.store(false);
    }
    for (std::uint64_t i = 0; i < round_trips; ++i) {
      while (line.value.load(std::memory_order_acquire) != 2 * i + 1) {
        if (!pinned.load(std::memory_order_relaxed)) return;
      }
      line.value.store(2 * i + 2, std::memory_order_release);
    }
  });
  if (const int e = pin_to(cpu_a); e != 0) {
    pin_error.store(e);
    pinned.store(false);
  }
  const auto t0 = std::chrono::steady_clock::now();
  for (std::uint64_t i = 0; i < round_trips && pinned.load(std::memory_order_relaxed); ++i) {
    line.value.store(2 * i + 1, std::memory_order_release);
    while (line.value.load(std::memory_order_acquire) != 2 * i + 2) {
      if (!pinned.load(std::memory_order_relaxed)) break;
    }
  }
  const auto t1 = std::chrono::steady_clock::now();
  other.join();
  *error = pin_error.load();
  if (!pinned.load()) return -1;
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(round_trips);
}

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) out.push_back(c);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int cpu_a = -1, cpu_b = -1;
  std::uint64_t round_trips = 200000;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json") {
      json = true;
    } else if (arg == "--cpus" && i + 1 < argc) {
      if (std::sscanf(argv[++i], "%d,%d", &cpu_a, &cpu_b) != 2 || cpu_a < 0 || cpu_b < 0 || cpu_a == cpu_b)
        usage("--cpus takes two different cpu numbers, as A,B");
      if (cpu_a >= CPU_SETSIZE || cpu_b >= CPU_SETSIZE)
        usage(("--cpus: cpu numbers go up to " + std::to_string(CPU_SETSIZE - 1)).c_str());
    } else if (arg == "--round-trips" && i + 1 < argc) {
      char* end = nullptr;
      round_trips = std::strtoull(argv[++i], &end, 10);
      if (end == argv[i] || *end != '\0' || round_trips == 0 || round_trips > 100000000)
        usage("--round-trips takes a count from 1 to 100000000");
    } else {
      usage(("unknown argument '" + arg + "'").c_str());
    }
  }
  if (cpu_a < 0) {
    const std::vector<int> cpus = allowed_cpus();
    if (cpus.size() < 2) {
      std::fprintf(stderr, "sparcoll-core-latency: this process may run on %zu cpu(s); it needs two\n", cpus.size());
      return 1;
    }
    cpu_a = cpus[0];
    cpu_b = cpus[1];
  }
  std::vector<double> runs;
  for (int r = 0; r < 5; ++r) {
    int error = 0;
    const double ns = one_run(cpu_a, cpu_b, round_trips, &error);
    if (ns < 0) {
      std::fprintf(stderr, "sparcoll-core-latency: cannot pin threads to cpus %d and %d: %s\n", cpu_a, cpu_b,
                   std::strerror(error));
      return 1;
    }
    runs.push_back(ns);
  }
  std::sort(runs.begin(), runs.end());
  if (json)
    std::printf("{\"kind\": \"core_latency\", \"cpus\": [%d, %d], \"round_trip_ns\": %.1f, \"min_ns\": %.1f, \"max_ns\": %.1f}\n",
                cpu_a, cpu_b, runs[2], runs[0], runs[4]);
  else
    std::printf("cpus %d,%d: cache-line round trip %.0f ns (median of 5 runs of %llu; %.0f-%.0f)\n", cpu_a, cpu_b,
                runs[2], static_cast<unsigned long long>(round_trips), runs[0], runs[4]);
  return 0;
}
