// sparcoll-driver-peer: one "process" of a DriverCluster (driver_cluster.hpp) as a real process.
// It connects to the cluster's store as process <index>, creates driver <name>, writes 'k' (or
// 'e' and the error) to stdout, and waits to be killed (it dies with its parent too).
//
// The failure suite uses it for drivers whose child cannot be a plain fork of the test process:
// dpdk's EAL runs once per process and a forked copy of a process that runs it is unusable.
//
// usage: sparcoll-driver-peer <driver> <store host:port> <key prefix> <index> <processes>
//                             <channels> <max message> <deadline ms>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "control/store.hpp"
#include "membership/store_exchange.hpp"
#include "driver_cluster.hpp"
#include "transport/driver.hpp"

int main(int argc, char** argv) {
  using namespace sparcoll;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (argc != 9) {
    std::fprintf(stderr, "usage: %s driver store prefix index processes channels max_message deadline_ms\n", argv[0]);
    return 2;
  }
  const std::string driver_name = argv[1];
  const std::uint32_t index = static_cast<std::uint32_t>(std::strtoul(argv[4], nullptr, 10));
  const std::uint32_t processes = static_cast<std::uint32_t>(std::strtoul(argv[5], nullptr, 10));
  const std::uint32_t channels = static_cast<std::uint32_t>(std::strtoul(argv[6], nullptr, 10));
  const std::uint32_t max_message = static_cast<std::uint32_t>(std::strtoul(argv[7], nullptr, 10));
  const std::uint32_t deadline_ms = static_cast<std::uint32_t>(std::strtoul(argv[8], nullptr, 10));

  Options options;
  options.job_token = test::kTestJobToken;
  options.max_message = max_message;
  options.threads = channels;
  std::unique_ptr<control::Store> store;
  Status status = control::Store::connect(argv[2], test::kTestJobToken, "rank " + std::to_string(index), 5000, &store);
  std::unique_ptr<transport::Driver> driver;
  if (status.ok()) {
    membership::StoreExchange exchange(*store, argv[3], driver_name, index);
    transport::DriverContext ctx;
    ctx.options = &options;
    ctx.exchange = &exchange;
    ctx.job_id = argv[3];
    ctx.self = index;
    for (std::uint32_t i = 0; i < processes; ++i) {
      transport::ProcessInfo info;
      info.index = i;
      info.name = "rank " + std::to_string(i);
      info.pid = i == index ? getpid() : getppid();
      info.host = "driver-test-host";
      info.address = "127.0.0.1";
      ctx.processes.push_back(info);
      if (i != index) ctx.peers.push_back(i);
    }
    ctx.channels = channels;
    ctx.max_message = max_message;
    ctx.deadline_ms = deadline_ms;
    status = transport::create_driver(driver_name, ctx, &driver);
  }
  const std::string report = status.ok() ? "k" : "e" + status.to_string();
  [[maybe_unused]] ssize_t written = write(STDOUT_FILENO, report.data(), report.size());
  for (;;) pause();
}
