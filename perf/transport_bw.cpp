// sparcoll-transport-bw: raw one-way goodput of a driver (shm, tcp, rdma, ...) through the
// transport interface the engine uses, for comparison with the vendor tools (ib_write_bw,
// iperf) on the same link. Two "processes" as two threads of this program, each with its own
// driver instance and store client (like the driver conformance suite):
//   sparcoll-transport-bw --driver rdma --size 65536 --seconds 3
// Prints one line: driver, message size, messages, seconds, GB/s (1e9 bytes), Mmsg/s.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "control/bootstrap.hpp"
#include "control/store.hpp"
#include "transport/driver.hpp"

namespace {

using namespace sparcoll;
using Clock = std::chrono::steady_clock;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "sparcoll-transport-bw: %s\n", what.c_str());
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  std::string driver_name = "shm";
  std::uint32_t size = 65536;
  double seconds = 3.0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) fail("missing value after " + a);
    const std::string v = argv[++i];
    if (a == "--driver") driver_name = v;
    else if (a == "--size") size = static_cast<std::uint32_t>(std::strtoul(v.c_str(), nullptr, 10));
    else if (a == "--seconds") seconds = std::atof(v.c_str());
    else fail("unknown flag " + a + " (flags: --driver NAME --size BYTES --seconds S)");
  }
  if (size < 8 || size > (64u << 20) || seconds <= 0) fail("--size must be in [8, 64 MiB] and --seconds > 0");

  const std::string token = "transport-bw";
  std::unique_ptr<control::StoreServer> server;
  Status s = control::StoreServer::start("127.0.0.1:0", token, &server);
  if (!s.ok()) fail(s.to_string());
  const std::string store = "127.0.0.1:" + std::to_string(server->port());

  std::vector<transport::ProcessInfo> procs(2);
  for (std::uint32_t i = 0; i < 2; ++i) {
    procs[i].index = i;
    procs[i].name = "rank " + std::to_string(i);
    procs[i].pid = 0;  // one real process: drivers then rely on their own close signals
    procs[i].host = control::host_identity();
    procs[i].address = "127.0.0.1";
  }
  Options options[2];
  std::unique_ptr<control::Store> stores[2];
  std::unique_ptr<transport::Driver> drivers[2];
  Status created[2];
  std::vector<std::thread> setup;
  for (std::uint32_t i = 0; i < 2; ++i) {
    options[i].job_token = token;
    options[i].max_message = size;
    options[i].shm_ring_bytes = 1u << 24;
    setup.emplace_back([&, i] {
      created[i] = control::Store::connect(store, token, procs[i].name, 10000, &stores[i]);
      if (!created[i].ok()) return;
      transport::DriverContext ctx;
      ctx.options = &options[i];
      ctx.store = stores[i].get();
      ctx.key_prefix = "bw/";
      ctx.self = i;
      ctx.processes = procs;
      ctx.peers = {1 - i};
      ctx.channels = 1;
      ctx.max_message = size;
      ctx.deadline_ms = 20000;
      created[i] = transport::create_driver(driver_name, ctx, &drivers[i]);
    });
  }
  for (auto& t : setup) t.join();
  for (const Status& c : created)
    if (!c.ok()) fail(c.to_string());

  std::vector<std::byte> payload(size, std::byte{0x5a});
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> received{0};
  Clock::time_point first_receive, last_receive;
  std::thread receiver([&] {
    transport::Channel& ch = drivers[1]->channel(0);
    transport::ReceivedMessage msgs[64];
    bool first = true;
    while (!stop.load(std::memory_order_relaxed)) {
      const int n = ch.poll(msgs, 64);
      if (n < 0) fail(ch.error().to_string());
      if (n == 0) continue;
      if (first) first_receive = Clock::now(), first = false;
      received.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
      last_receive = Clock::now();
    }
  });
  transport::Channel& ch = drivers[0]->channel(0);
  struct iovec iov = {payload.data(), payload.size()};
  std::uint64_t sent = 0;
  const Clock::time_point end = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  transport::ReceivedMessage none[1];
  while (Clock::now() < end) {
    const transport::SendResult r = ch.send(1, &iov, 1);
    if (r == transport::SendResult::ok) {
      ++sent;
    } else if (r == transport::SendResult::error) {
      fail(ch.error().to_string());
    }
    if (ch.poll(none, 1) < 0) fail(ch.error().to_string());  // progress sends, credits
  }
  // Drain: the receiver counts what is still in flight.
  const Clock::time_point drain_until = Clock::now() + std::chrono::seconds(10);
  while (received.load() < sent && Clock::now() < drain_until) {
    if (ch.poll(none, 1) < 0) fail(ch.error().to_string());
    std::this_thread::yield();
  }
  stop.store(true);
  receiver.join();
  const std::uint64_t got = received.load();
  if (got != sent) fail("sent " + std::to_string(sent) + " messages, " + std::to_string(got) + " arrived");
  const double elapsed = std::chrono::duration<double>(last_receive - first_receive).count();
  std::printf("driver %s size %u messages %llu seconds %.3f GBps %.3f Mmsgps %.3f\n", driver_name.c_str(), size,
              static_cast<unsigned long long>(got), elapsed, static_cast<double>(got) * size / elapsed / 1e9,
              static_cast<double>(got) / elapsed / 1e6);
  return 0;
}
