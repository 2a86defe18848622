// sparcoll-transport-bw: raw one-way goodput of a driver (shm, tcp, rdma, ...) through the
// transport interface the engine uses, for comparison with the vendor tools (ib_write_bw,
// iperf, sparcoll-dpdk-raw-bw) on the same link. Two "processes", each with its own driver
// instance and store client: by default two threads of this program (like the driver
// conformance suite); with --processes 2 a forked receiver process, the layout of the raw tools
// (one sender process, one receiver process). --pin pins the sender to CPU 1 and the receiver
// to CPU 0, as sparcoll-dpdk-raw-bw pins its client (lcore 1) and server (lcore 0).
//   sparcoll-transport-bw --driver rdma --size 65536 --seconds 3
//   sparcoll-transport-bw --driver dpdk --size 8192 --seconds 3 --processes 2 --pin
// The sender sends until the driver refuses (no_resource) or 32 messages went out, then polls
// once (progress, acks, credits): the pattern of the engine's progress loop.
// --sender-rank 1 (with --processes 2): the sender is rank 1 and the receiver rank 0 (default:
// the sender is rank 0). Drivers whose links are asymmetric (dpdk memif: the lower rank is the
// server, the higher one may be a zero-copy client) are measured in both directions this way.
// --lockstep: one thread drives both ends in turn (32 sends, a poll of each end): the CPU cost of
// the transport per message, free of scheduling effects (one core's worth of work).
// --register: zero-copy sends (Driver::register_memory, then send(…, UserMemory)): the sender
// rotates over 4 registered buffers of up to 4096 messages each (32 MiB at most) and, before
// reusing a buffer, waits for user_memory_released(): the engine's rule for a registered send
// buffer (an op completes once the driver no longer reads it). Fails if the driver declines.
// --register --hot: one registered message-sized buffer, never rewritten, sent over and over
// (allowed: its bytes stay unchanged), released once at the end: the source stays in cache like
// the copy path's single buffer and the raw tool's recycled mbufs, so the difference to the
// copy path is the copy alone; the rotation above also pays for reading cold memory and for
// draining the window before each reuse.
// Prints one line: driver, message size, messages, seconds, GB/s (1e9 bytes), Mmsg/s; the
// channels' packet counters and the number of refused sends go to stderr (packet drivers).
#include <pthread.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "membership/bootstrap.hpp"
#include "control/store.hpp"
#include "membership/store_exchange.hpp"
#include "transport/driver.hpp"

namespace {

using namespace sparcoll;
using Clock = std::chrono::steady_clock;

constexpr int kSendsPerPoll = 32;
const std::string kToken = "transport-bw";

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "sparcoll-transport-bw: %s\n", what.c_str());
  std::exit(1);
}

void pin_to(unsigned cpu) {
  const unsigned n = std::thread::hardware_concurrency();
  if (n < 2) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu % n, &set);
  if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0)
    std::fprintf(stderr, "sparcoll-transport-bw: warning: could not pin to CPU %u\n", cpu % n);
}

std::int64_t ns_of(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

bool write_all(int fd, const void* data, std::size_t len) {
  const auto* p = static_cast<const char*>(data);
  while (len > 0) {
    const ssize_t k = ::write(fd, p, len);
    if (k <= 0) return false;
    p += k, len -= static_cast<std::size_t>(k);
  }
  return true;
}

bool read_all(int fd, void* data, std::size_t len) {
  auto* p = static_cast<char*>(data);
  while (len > 0) {
    const ssize_t k = ::read(fd, p, len);
    if (k <= 0) return false;
    p += k, len -= static_cast<std::size_t>(k);
  }
  return true;
}

struct Run {
  std::string driver_name;
  std::uint32_t size = 65536;
  std::string store;
  std::vector<transport::ProcessInfo> procs;
};

Status create(const Run& run, std::uint32_t i, Options* options, std::unique_ptr<control::Store>* store,
              std::unique_ptr<transport::Driver>* driver) {
  try {
    *options = Options::from_env();  // SPARCOLL_* knobs of the driver (SPARCOLL_DPDK_MEMIF_ZERO_COPY, ...)
  } catch (const Error& e) {
    return e.status();
  }
  options->job_token = kToken;
  options->max_message = run.size;
  options->shm_ring_bytes = 1u << 24;
  Status s = control::Store::connect(run.store, kToken, run.procs[i].name, 10000, store);
  if (!s.ok()) return s;
  membership::StoreExchange exchange(**store, "bw/", run.driver_name, i);
  transport::DriverContext ctx;
  ctx.options = options;
  ctx.exchange = &exchange;
  ctx.job_id = "bw/";
  ctx.self = i;
  ctx.processes = run.procs;
  ctx.peers = {1 - i};
  ctx.channels = 1;
  ctx.max_message = run.size;
  ctx.deadline_ms = 20000;
  return transport::create_driver(run.driver_name, ctx, driver);
}

// The channel's own counters (dpdk: "packets_sent 12, packets_received 10, ..."), if it has any.
void print_counters(const char* who, const transport::ChannelCounters& c, const std::string& extra) {
  if (c.count == 0) return;
  std::string line;
  for (std::uint32_t i = 0; i < c.count; ++i)
    line += std::string(i == 0 ? "" : ", ") + c.items[i].name + " " + std::to_string(c.items[i].value);
  std::fprintf(stderr, "# %s: %s%s\n", who, line.c_str(), extra.c_str());
}

// What the receiver saw: messages, first and last arrival (steady clock, ns; CLOCK_MONOTONIC is
// the same in both processes).
struct Received {
  std::uint64_t messages = 0;
  std::int64_t first_ns = 0;
  std::int64_t last_ns = 0;
};

// Polls until `target` (set by another thread; ~0 until then) messages arrived, or 10 s after
// the target is known.
Received receive_loop(transport::Channel& ch, const std::atomic<std::uint64_t>& target, bool pin) {
  if (pin) pin_to(0);
  transport::ReceivedMessage msgs[64];
  Received r;
  Clock::time_point give_up = Clock::time_point::max();
  std::uint32_t idle = 0;
  for (;;) {
    const int n = ch.poll(msgs, 64);
    if (n < 0) fail(ch.error().to_string());
    if (n > 0) {
      const std::int64_t now = ns_of(Clock::now());
      if (r.messages == 0) r.first_ns = now;
      r.messages += static_cast<std::uint64_t>(n);
      r.last_ns = now;
      continue;
    }
    if ((++idle & 1023) != 0) continue;
    const std::uint64_t t = target.load(std::memory_order_acquire);
    if (t == ~std::uint64_t{0}) continue;
    if (r.messages >= t) break;
    if (give_up == Clock::time_point::max()) give_up = Clock::now() + std::chrono::seconds(10);
    if (Clock::now() > give_up) break;
  }
  return r;
}

// Where the sender's messages come from: one buffer, copied by send(); or (--register) a
// rotation over registered buffers sent in place.
class Payloads {
 public:
  static constexpr std::size_t kBuffers = 4;

  Payloads(std::uint32_t size, transport::Driver* registrar, bool hot) : size_(size) {
    if (registrar == nullptr) {
      buffers_.emplace_back(size, std::byte{0x5a});
      per_buffer_ = 1;
      return;
    }
    per_buffer_ = hot ? 1 : std::clamp<std::size_t>((std::size_t{32} << 20) / size, 16, 4096);
    hot_ = hot;
    for (std::size_t b = 0; b < (hot ? 1 : kBuffers); ++b) {
      buffers_.emplace_back(per_buffer_ * size, std::byte{0x5a});
      transport::UserMemory m;
      if (!registrar->register_memory(buffers_[b].data(), buffers_[b].size(), &m))
        fail("--register: driver " + std::string(registrar->name()) + " declined to register the send buffer (see its log)");
      memory_.push_back(m);
    }
    dirty_.assign(buffers_.size(), false);
  }
  bool zero_copy() const { return !memory_.empty(); }

  // Sends the next message; `progress` polls both ends while waiting for a buffer's release.
  template <typename Progress>
  transport::SendResult send(transport::Channel& ch, std::uint32_t peer, Progress&& progress) {
    if (!zero_copy()) {
      struct iovec iov = {buffers_[0].data(), size_};
      return ch.send(peer, &iov, 1);
    }
    if (hot_) {
      struct iovec iov = {buffers_[0].data(), size_};
      return ch.send(peer, &iov, 1, memory_[0]);
    }
    if (slot_ == 0 && dirty_[buffer_]) {
      ++waits_;
      while (!ch.user_memory_released()) progress();
      dirty_.assign(kBuffers, false);
    }
    struct iovec iov = {buffers_[buffer_].data() + slot_ * size_, size_};
    const transport::SendResult r = ch.send(peer, &iov, 1, memory_[buffer_]);
    if (r == transport::SendResult::ok) {
      dirty_[buffer_] = true;
      if (++slot_ == per_buffer_) {
        slot_ = 0;
        buffer_ = (buffer_ + 1) % kBuffers;
      }
    }
    return r;
  }
  // Before the buffers go away: the driver may still read them (unacknowledged frames, which
  // teardown would retransmit).
  template <typename Progress>
  void release(transport::Channel& ch, Progress&& progress) {
    if (!zero_copy()) return;
    const Clock::time_point give_up = Clock::now() + std::chrono::seconds(10);
    while (!ch.user_memory_released()) {
      if (Clock::now() > give_up) fail("--register: the driver still reads the send buffers after 10 s");
      progress();
    }
  }
  std::string summary() const {
    if (!zero_copy()) return "";
    if (hot_) return ", zero-copy from one unchanging buffer (--hot)";
    return ", zero-copy: waited for a release " + std::to_string(waits_) + " times (" + std::to_string(kBuffers) +
           " buffers of " + std::to_string(per_buffer_) + " messages)";
  }

 private:
  std::uint32_t size_;
  std::size_t per_buffer_ = 1;
  std::vector<std::vector<std::byte>> buffers_;
  std::vector<transport::UserMemory> memory_;
  std::vector<bool> dirty_;  // sent from since the last observed release
  std::size_t buffer_ = 0, slot_ = 0;
  std::uint64_t waits_ = 0;
  bool hot_ = false;
};

// Sends for `seconds`; returns the messages sent.
std::uint64_t send_loop(transport::Channel& ch, std::uint32_t peer, Payloads& payloads, double seconds, bool pin,
                        std::uint64_t* refused_out) {
  if (pin) pin_to(1);
  std::uint64_t sent = 0, refused = 0;
  transport::ReceivedMessage none[1];
  const Clock::time_point end = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  int since_poll = 0;
  for (std::uint32_t iter = 1;; ++iter) {
    if ((iter & 63) == 0 && Clock::now() >= end) break;
    const transport::SendResult r = payloads.send(ch, peer, [&] {
      if (ch.poll(none, 1) < 0) fail(ch.error().to_string());
    });
    if (r == transport::SendResult::ok) {
      ++sent;
      if (++since_poll < kSendsPerPoll) continue;
    } else if (r == transport::SendResult::no_resource) {
      ++refused;
    } else {
      fail(ch.error().to_string());
    }
    since_poll = 0;
    if (ch.poll(none, 1) < 0) fail(ch.error().to_string());  // progress sends, credits
  }
  *refused_out = refused;
  return sent;
}

void print_result(const Run& run, const Received& got) {
  const double elapsed = static_cast<double>(got.last_ns - got.first_ns) / 1e9;
  std::printf("driver %s size %u messages %llu seconds %.3f GBps %.3f Mmsgps %.3f\n", run.driver_name.c_str(), run.size,
              static_cast<unsigned long long>(got.messages), elapsed,
              static_cast<double>(got.messages) * run.size / elapsed / 1e9, static_cast<double>(got.messages) / elapsed / 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  Run run;
  run.driver_name = "shm";
  double seconds = 3.0;
  int processes = 1;
  bool pin = false, lockstep = false, reg = false, hot = false;
  std::uint32_t sender_rank = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--pin" || a == "--lockstep" || a == "--register" || a == "--hot") {
      (a == "--pin" ? pin : a == "--lockstep" ? lockstep : a == "--hot" ? hot : reg) = true;
      continue;
    }
    if (i + 1 >= argc) fail("missing value after " + a);
    const std::string v = argv[++i];
    if (a == "--driver") run.driver_name = v;
    else if (a == "--size") run.size = static_cast<std::uint32_t>(std::strtoul(v.c_str(), nullptr, 10));
    else if (a == "--seconds") seconds = std::atof(v.c_str());
    else if (a == "--processes") processes = std::atoi(v.c_str());
    else if (a == "--sender-rank") sender_rank = static_cast<std::uint32_t>(std::strtoul(v.c_str(), nullptr, 10));
    else fail("unknown flag " + a + " (flags: --driver NAME --size BYTES --seconds S --processes 1|2 --sender-rank 0|1 --pin --lockstep --register --hot)");
  }
  if (run.size < 8 || run.size > (64u << 20) || seconds <= 0) fail("--size must be in [8, 64 MiB] and --seconds > 0");
  if (processes != 1 && processes != 2) fail("--processes must be 1 or 2");
  if (sender_rank > 1 || (sender_rank == 1 && processes != 2)) fail("--sender-rank is 0 or 1, and 1 needs --processes 2");
  if (hot && !reg) fail("--hot is a way of --register");
  if (lockstep && processes != 1) fail("--lockstep runs both ends in one thread: not with --processes 2");

  run.procs.resize(2);
  for (std::uint32_t i = 0; i < 2; ++i) {
    run.procs[i].index = i;
    run.procs[i].name = "rank " + std::to_string(i);
    run.procs[i].pid = 0;  // drivers then rely on their own close signals
    run.procs[i].host = membership::host_identity();
    run.procs[i].address = "127.0.0.1";
  }

  if (processes == 2) {
    // Fork first, before any thread or EAL exists: the child is the receiver (rank 1 unless --sender-rank 1).
    int down[2], up[2];  // parent -> child (store port, then messages sent); child -> parent (result)
    if (pipe(down) != 0 || pipe(up) != 0) fail(std::string("pipe: ") + std::strerror(errno));
    const pid_t child = fork();
    if (child < 0) fail(std::string("fork: ") + std::strerror(errno));
    if (child == 0) {
      close(down[1]);
      close(up[0]);
      std::uint16_t port = 0;
      if (!read_all(down[0], &port, sizeof port)) _exit(1);
      run.store = "127.0.0.1:" + std::to_string(port);
      Options options;
      std::unique_ptr<control::Store> store;
      std::unique_ptr<transport::Driver> driver;
      Status s = create(run, 1 - sender_rank, &options, &store, &driver);
      if (!s.ok()) fail(s.to_string());
      std::atomic<std::uint64_t> target{~std::uint64_t{0}};
      std::thread reader([&] {
        std::uint64_t n = 0;
        target.store(read_all(down[0], &n, sizeof n) ? n : 0, std::memory_order_release);
      });
      const Received got = receive_loop(driver->channel(0), target, pin);
      reader.join();
      print_counters("receiver", driver->channel(0).counters(), "");
      if (!write_all(up[1], &got, sizeof got)) _exit(1);
      driver.reset();  // the close handshake: the sender closes at the same time
      std::fflush(nullptr);
      _exit(0);
    }
    close(down[0]);
    close(up[1]);
    std::unique_ptr<control::StoreServer> server;
    Status s = control::StoreServer::start("127.0.0.1:0", kToken, &server);
    if (!s.ok()) fail(s.to_string());
    const std::uint16_t port = server->port();
    run.store = "127.0.0.1:" + std::to_string(port);
    if (!write_all(down[1], &port, sizeof port)) fail("the receiver process is gone");
    Options options;
    std::unique_ptr<control::Store> store;
    std::unique_ptr<transport::Driver> driver;
    s = create(run, sender_rank, &options, &store, &driver);
    if (!s.ok()) fail(s.to_string());
    transport::Channel& ch = driver->channel(0);
    std::uint64_t refused = 0;
    Payloads payloads(run.size, reg ? driver.get() : nullptr, hot);
    const std::uint64_t sent = send_loop(ch, 1 - sender_rank, payloads, seconds, pin, &refused);
    // Everything acknowledged (packet drivers) or out of this process, then tell the receiver
    // how many to wait for.
    const Clock::time_point drain_until = Clock::now() + std::chrono::seconds(10);
    while (!ch.flushed() && Clock::now() < drain_until) {
    }
    payloads.release(ch, [] {});
    if (!write_all(down[1], &sent, sizeof sent)) fail("the receiver process is gone");
    Received got;
    const bool have = read_all(up[0], &got, sizeof got);
    print_counters("sender", ch.counters(), ", send() refused " + std::to_string(refused) + " times" + payloads.summary());
    driver.reset();
    int status = 0;
    waitpid(child, &status, 0);
    if (!have) fail("the receiver process failed");
    if (got.messages != sent) fail("sent " + std::to_string(sent) + " messages, " + std::to_string(got.messages) + " arrived");
    print_result(run, got);
    return 0;
  }

  std::unique_ptr<control::StoreServer> server;
  Status s = control::StoreServer::start("127.0.0.1:0", kToken, &server);
  if (!s.ok()) fail(s.to_string());
  run.store = "127.0.0.1:" + std::to_string(server->port());
  Options options[2];
  std::unique_ptr<control::Store> stores[2];
  std::unique_ptr<transport::Driver> drivers[2];
  Status created[2];
  std::vector<std::thread> setup;
  for (std::uint32_t i = 0; i < 2; ++i)
    setup.emplace_back([&, i] { created[i] = create(run, i, &options[i], &stores[i], &drivers[i]); });
  for (auto& t : setup) t.join();
  for (const Status& c : created)
    if (!c.ok()) fail(c.to_string());

  if (lockstep) {
    // One thread drives both ends in turn: the CPU cost of the transport itself, with no
    // scheduling (no waiting for a descheduled peer, no spinning on an empty link).
    if (pin) pin_to(1);
    transport::Channel& tx = drivers[0]->channel(0);
    transport::Channel& rx = drivers[1]->channel(0);
    Payloads payloads(run.size, reg ? drivers[0].get() : nullptr, hot);
    transport::ReceivedMessage msgs[64], none[1];
    std::uint64_t sent = 0, refused = 0;
    Received got;
    auto progress = [&] {
      if (tx.poll(none, 1) < 0) fail(tx.error().to_string());
      int n;
      while ((n = rx.poll(msgs, 64)) > 0) got.messages += static_cast<std::uint64_t>(n);
      if (n < 0) fail(rx.error().to_string());
    };
    const Clock::time_point start = Clock::now();
    const Clock::time_point end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    for (std::uint32_t iter = 1;; ++iter) {
      if ((iter & 15) == 0 && Clock::now() >= end) break;
      for (int k = 0; k < kSendsPerPoll; ++k) {
        const transport::SendResult r = payloads.send(tx, 1, progress);
        if (r == transport::SendResult::error) fail(tx.error().to_string());
        if (r != transport::SendResult::ok) {
          ++refused;
          break;
        }
        ++sent;
      }
      if (tx.poll(none, 1) < 0) fail(tx.error().to_string());
      int n;
      while ((n = rx.poll(msgs, 64)) > 0) got.messages += static_cast<std::uint64_t>(n);
      if (n < 0) fail(rx.error().to_string());
    }
    for (int spin = 0; got.messages < sent && spin < 10000000; ++spin) {
      int n = rx.poll(msgs, 64);
      if (n < 0) fail(rx.error().to_string());
      got.messages += static_cast<std::uint64_t>(n);
      if (tx.poll(none, 1) < 0) fail(tx.error().to_string());
    }
    got.first_ns = ns_of(start);
    got.last_ns = ns_of(Clock::now());
    payloads.release(tx, progress);
    print_counters("sender", tx.counters(), ", send() refused " + std::to_string(refused) + " times" + payloads.summary());
    print_counters("receiver", rx.counters(), "");
    if (got.messages != sent) fail("sent " + std::to_string(sent) + " messages, " + std::to_string(got.messages) + " arrived");
    print_result(run, got);
    return 0;
  }

  std::atomic<std::uint64_t> target{~std::uint64_t{0}};
  Received got;
  std::thread receiver([&] { got = receive_loop(drivers[1]->channel(0), target, pin); });
  transport::Channel& ch = drivers[0]->channel(0);
  std::uint64_t refused = 0;
  Payloads payloads(run.size, reg ? drivers[0].get() : nullptr, hot);
  const std::uint64_t sent = send_loop(ch, 1, payloads, seconds, pin, &refused);
  target.store(sent, std::memory_order_release);
  // Drain: the receiver counts what is still in flight (this side keeps retransmitting and
  // reading acks meanwhile).
  transport::ReceivedMessage none[1];
  const Clock::time_point drain_until = Clock::now() + std::chrono::seconds(11);
  while (Clock::now() < drain_until) {
    if (ch.poll(none, 1) < 0) fail(ch.error().to_string());
    if (ch.flushed()) break;
    std::this_thread::yield();
  }
  payloads.release(ch, [&] {
    if (ch.poll(none, 1) < 0) fail(ch.error().to_string());
  });
  receiver.join();
  print_counters("sender", ch.counters(), ", send() refused " + std::to_string(refused) + " times" + payloads.summary());
  print_counters("receiver", drivers[1]->channel(0).counters(), "");
  if (got.messages != sent) fail("sent " + std::to_string(sent) + " messages, " + std::to_string(got.messages) + " arrived");
  print_result(run, got);
  return 0;
}
