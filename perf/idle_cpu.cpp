// sparcoll-idle-cpu: the CPU a communicator's own threads take while the application computes.
// In training, the time between allreduce bursts is the model's: every cycle sparcoll's
// progress and collective threads spend spinning or waking there is taken from it (on 2 cores,
// directly). Each rank runs a few allreduces, then sleeps --seconds and reports its process CPU
// time over that sleep (the main thread sleeps, so it is all sparcoll's), then the largest share
// over the ranks. Run under sparcoll-run, like sparcoll-perf:
//   sparcoll-run -n 2 --transport shm -- sparcoll-idle-cpu [--seconds S] [--after-ms MS]
// --after-ms: how long after the last allreduce the measured sleep starts (0: at once, inside
// SPARCOLL_IDLE_SPIN_US, where spinning is intended).
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <sparcoll/communicator.hpp>

namespace {

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "sparcoll-idle-cpu: %s\nusage: sparcoll-run -n N -- sparcoll-idle-cpu [--seconds S] [--after-ms MS]\n", why);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 2.0;
  int after_ms = 100;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage(("missing value after " + a).c_str());
    if (a == "--seconds") seconds = std::atof(argv[++i]);
    else if (a == "--after-ms") after_ms = std::atoi(argv[++i]);
    else usage(("unknown flag " + a).c_str());
  }
  if (seconds <= 0 || seconds > 600) usage("--seconds must be in (0, 600]");
  if (after_ms < 0) usage("--after-ms must be >= 0");
  auto comm = sparcoll::Communicator::from_env();
  std::vector<float> small(1024, 1.0f), large(1 << 22, 1.0f);
  for (int k = 0; k < 3; ++k) {
    comm.allreduce(small.data(), small.data(), small.size(), sparcoll::DataType::f32, sparcoll::ReduceOp::sum);
    comm.allreduce(large.data(), large.data(), large.size(), sparcoll::DataType::f32, sparcoll::ReduceOp::sum);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(after_ms));
  const double before = cpu_seconds();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  const double share = (cpu_seconds() - before) / seconds;
  float worst = static_cast<float>(share);
  comm.allreduce(&worst, &worst, 1, sparcoll::DataType::f32, sparcoll::ReduceOp::max);
  std::printf("rank %d: sparcoll's threads took %.1f%% of a core while idle for %.1f s\n", comm.rank(), 100 * share, seconds);
  if (comm.rank() == 0) std::printf("idle-cpu: worst rank %.1f%% of a core\n", 100 * worst);
  return 0;
}
