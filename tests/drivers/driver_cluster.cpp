#include "driver_cluster.hpp"

#include <unistd.h>

#include <atomic>
#include <thread>

namespace sparcoll::test {
namespace {

std::atomic<int> g_cluster_counter{0};

// 1 MiB of 0..255 repeated, plus slack for the offset: every test message is a window into it.
constexpr std::size_t kPatternBytes = (1u << 20) + 256;
const std::byte* pattern() {
  static const std::vector<std::byte> bytes = [] {
    std::vector<std::byte> b(kPatternBytes);
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::byte>(i & 0xff);
    return b;
  }();
  return bytes.data();
}

}  // namespace

DriverCluster::DriverCluster(ClusterConfig config) : config_(std::move(config)) {
  // A fresh prefix per cluster: shm segment names derive from it.
  key_prefix_ = "drivertest/" + std::to_string(getpid()) + "/" + std::to_string(g_cluster_counter++) + "/";
  for (std::uint32_t i = 0; i < config_.processes; ++i) {
    auto options = std::make_unique<Options>();
    options->job_token = kTestJobToken;
    options->shm_ring_bytes = config_.shm_ring_bytes;
    options->max_message = config_.max_message;
    options->threads = config_.channels;
    options_.push_back(std::move(options));
  }
  pids_.assign(config_.processes, getpid());
  hosts_.assign(config_.processes, "driver-test-host");
  stores_.resize(config_.processes);
  exchanges_.resize(config_.processes);
  drivers_.resize(config_.processes);
}

DriverCluster::~DriverCluster() {
  for (auto& driver : drivers_) driver.reset();
}

Status DriverCluster::start_store() { return control::StoreServer::start("127.0.0.1:0", kTestJobToken, &server_); }

std::string DriverCluster::store_address() const { return "127.0.0.1:" + std::to_string(server_->port()); }

std::vector<transport::ProcessInfo> DriverCluster::processes() const {
  std::vector<transport::ProcessInfo> list;
  for (std::uint32_t i = 0; i < config_.processes; ++i) {
    transport::ProcessInfo info;
    info.index = i;
    info.name = "rank " + std::to_string(i);
    info.pid = pids_[i];
    info.host = hosts_[i];
    info.address = "127.0.0.1";
    list.push_back(info);
  }
  return list;
}

Status DriverCluster::context(std::uint32_t i, transport::DriverContext* out) {
  if (stores_[i] == nullptr) {
    Status status = control::Store::connect(store_address(), kTestJobToken, "rank " + std::to_string(i), 5000, &stores_[i]);
    if (!status.ok()) return status;
    exchanges_[i] = std::make_unique<membership::StoreExchange>(*stores_[i], key_prefix_, config_.driver, i);
  }
  transport::DriverContext ctx;
  ctx.options = options_[i].get();
  ctx.exchange = exchanges_[i].get();
  ctx.job_id = key_prefix_;
  ctx.self = i;
  ctx.processes = processes();
  for (std::uint32_t p = 0; p < config_.processes; ++p)
    if (p != i) ctx.peers.push_back(p);
  ctx.channels = config_.channels;
  ctx.max_message = config_.max_message;
  ctx.deadline_ms = config_.deadline_ms;
  *out = std::move(ctx);
  return Status::Ok();
}

std::vector<Status> DriverCluster::create(const std::vector<std::uint32_t>& which) {
  std::vector<std::uint32_t> indices = which;
  if (indices.empty())
    for (std::uint32_t i = 0; i < config_.processes; ++i) indices.push_back(i);
  std::vector<Status> results(indices.size());
  std::vector<std::thread> threads;
  for (std::size_t k = 0; k < indices.size(); ++k) {
    threads.emplace_back([this, &results, &indices, k] {
      const std::uint32_t i = indices[k];
      transport::DriverContext ctx;
      Status status = context(i, &ctx);
      if (status.ok()) status = transport::create_driver(config_.driver, ctx, &drivers_[i]);
      results[k] = status;
    });
  }
  for (auto& thread : threads) thread.join();
  return results;
}

Status DriverCluster::start() {
  Status status = start_store();
  if (!status.ok()) return status;
  // When one rank fails on its own (say, out of memory), the others time out waiting for it:
  // report the cause, not the first timeout.
  const std::vector<Status> results = create();
  for (const Status& result : results)
    if (!result.ok() && result.code() != ErrorCode::timeout) return result;
  for (const Status& result : results)
    if (!result.ok()) return result;
  return Status::Ok();
}

void DriverCluster::run(const std::function<void(std::uint32_t)>& fn) {
  std::vector<std::thread> threads;
  for (std::uint32_t i = 0; i < config_.processes; ++i) threads.emplace_back(fn, i);
  for (auto& thread : threads) thread.join();
}

TestMessage test_message(std::uint64_t seq, std::uint32_t from, std::uint32_t to, std::uint32_t channel,
                         std::uint32_t max_message) {
  const std::uint64_t mix = seq * 2654435761u + from * 97u + to * 31u + channel * 7u;
  // Sizes cover 1..max_message; every 16th message is exactly max_message.
  const std::uint32_t size = seq % 16 == 15 ? max_message : static_cast<std::uint32_t>(1 + (mix >> 7) % max_message);
  return TestMessage{size, pattern() + (mix & 0xff)};
}

transport::SendResult send_gathered(transport::Channel& channel, std::uint32_t peer, const TestMessage& message) {
  const std::size_t a = message.size / 3;
  const std::size_t b = 2 * message.size / 3;
  auto* base = const_cast<std::byte*>(message.bytes);
  struct iovec iov[3] = {{base, a}, {base + a, b - a}, {base + b, message.size - b}};
  return channel.send(peer, iov, 3);
}

}  // namespace sparcoll::test
