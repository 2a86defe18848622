// sparcoll-run: starts the ranks (and aggregators) of a job on this host, like mpirun, and hosts
// their rendezvous store. Usage and failure rules: docs/launcher.md.
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#if SPARCOLL_DRIVER_SHM
#include "../../drivers/shm/shm_segment.hpp"
#endif
#include "control/store.hpp"
#include "tools/run_child.hpp"
#include "tools/run_environment.hpp"
#include "tools/run_options.hpp"
#include "tools/run_program_path.hpp"
#include "tools/run_signals.hpp"
#include "tools/run_supervisor.hpp"

namespace sparcoll::run {
namespace {

constexpr int kExitUsage = 2;
constexpr int kExitSetup = 1;
constexpr int kExitCannotExecute = 127;

void report(const std::string& message) { std::fprintf(stderr, "sparcoll-run: %s\n", message.c_str()); }

int usage_error(const std::string& message) {
  report(message);
  std::fputs(launch_usage(), stderr);
  return kExitUsage;
}

// Every child costs the launcher two pipe ends, open at the same time; 1024 ranks exceed the
// usual soft limit of 1024 descriptors.
Status raise_open_file_limit(int children, rlimit* original) {
  if (getrlimit(RLIMIT_NOFILE, original) != 0)
    return Status(ErrorCode::system_error, std::string("getrlimit RLIMIT_NOFILE: ") + std::strerror(errno));
  rlim_t needed = 2 * static_cast<rlim_t>(children) + 64;
  if (original->rlim_cur != RLIM_INFINITY && original->rlim_cur >= needed) return Status::Ok();
  if (original->rlim_cur == RLIM_INFINITY) return Status::Ok();
  if (original->rlim_max != RLIM_INFINITY && original->rlim_max < needed)
    return Status(ErrorCode::no_resource, std::to_string(children) + " processes need " + std::to_string(needed) +
                                              " open files but the hard limit (ulimit -Hn) is " +
                                              std::to_string(original->rlim_max));
  rlimit raised = *original;
  raised.rlim_cur = needed;
  if (setrlimit(RLIMIT_NOFILE, &raised) != 0)
    return Status(ErrorCode::system_error, std::string("setrlimit RLIMIT_NOFILE: ") + std::strerror(errno));
  return Status::Ok();
}

int launch(int argc, char** argv) {
  // First: the store server's thread, started below, must inherit the blocked signals.
  std::unique_ptr<LauncherSignals> signals;
  Status status = LauncherSignals::create(&signals);
  if (!status.ok()) {
    report(status.message());
    return kExitSetup;
  }

  LaunchOptions options;
  status = parse_launch_options(argc, argv, &options);
  if (!status.ok()) return usage_error(status.message());
  if (options.help) {
    std::fputs(launch_usage(), stdout);
    return 0;
  }
  std::string program;
  status = resolve_program(options.command[0], &program);
  if (!status.ok()) return usage_error(status.message());
  std::string aggregator_program;
  if (options.aggregators > 0) {
    status = sibling_executable("sparcoll-aggregator", &aggregator_program);
    if (!status.ok()) {
      report("--aggregators needs the sparcoll-aggregator program: " + status.message());
      return kExitUsage;
    }
  }

  ChildSetup setup;
  setup.signal_mask = signals->original_mask();
  status = raise_open_file_limit(options.ranks + options.aggregators, &setup.open_files);
  if (!status.ok()) {
    report(status.message());
    return kExitSetup;
  }

  JobEnvironment job;
  job.ranks = options.ranks;
  job.aggregators = options.aggregators;
  job.transport = options.transport;
  job.extra = options.env;
  status = make_job_token(&job.job_token);
  if (!status.ok()) {
    report(status.message());
    return kExitSetup;
  }
  std::unique_ptr<control::StoreServer> store;
  status = control::StoreServer::start("127.0.0.1:0", job.job_token, &store);
  if (!status.ok()) {
    report("cannot start the rendezvous store: " + status.to_string());
    return kExitSetup;
  }
  job.store_address = "127.0.0.1:" + std::to_string(store->port());

  SupervisorLimits limits;
  limits.timeout_s = options.timeout_s;
  Supervisor supervisor(signals.get(), limits, options.prefix);
  std::vector<std::int64_t> pids;
  // Aggregators first: they serve the ranks, which find them through the store.
  auto start = [&](const ChildIdentity& who, const std::string& path, const std::vector<std::string>& args) {
    SpawnedChild child;
    Status st = spawn_child(path, args, child_environment(job, who), setup, &child);
    if (!st.ok()) {
      supervisor.fail(who.name() + ": " + st.message(), kExitCannotExecute);
      return false;
    }
    pids.push_back(child.pid);
    supervisor.add(who, child);
    return true;
  };
  bool started = true;
  for (int j = 0; started && j < options.aggregators; ++j)
    started = start({ChildIdentity::Kind::aggregator, j}, aggregator_program, {aggregator_program});
  for (int i = 0; started && i < options.ranks; ++i)
    started = start({ChildIdentity::Kind::rank, i}, program, options.command);
  const int exit_code = supervisor.run();
#if SPARCOLL_DRIVER_SHM
  // A child killed while setting up shm leaves its segment's name in /dev/shm; every child is
  // gone now, so whatever names of theirs are left can go too.
  transport::shm::remove_segments_of(pids);
#endif
  return exit_code;
}

}  // namespace
}  // namespace sparcoll::run

int main(int argc, char** argv) { return sparcoll::run::launch(argc, argv); }
