// The rdma driver: device choice, one RdmaChannel per channel, connection through the setup
// exchange.
//
// Setup, per process (topics of the setup exchange in quotes):
//   1. choose device, port and GID (rdma_device.hpp), open it, allocate the PD;
//   2. per channel: CQ, registered rings and staging, one QP per peer in INIT with its
//      receives posted;
//   3. publish, for each peer alone, the endpoints of our QPs to it (one line per channel) as
//      "qp"; read the ones each peer published for us;
//   4. move every QP to RTR and RTS, publish "ready" and wait for every peer's:
//      nobody writes before every QP that could be written to is ready, so no early packet
//      burns retries.
// Zero-copy: buffers the application registers (Communicator::register_buffer) go through the
// same MrCache; sends then read blocks straight from them (RdmaChannel::gather).
// Teardown: tell every live peer we are closing (imm kCloseFlag, with the process whose failure
// ended this one, if any), wait up to 300 ms for those writes, then destroy channels (QPs, CQs,
// memory), the registration cache, PD and device.
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/log.hpp"
#include "rdma_channel.hpp"
#include "rdma_device.hpp"
#include "rdma_driver.hpp"
#include "rdma_mr_cache.hpp"
#include "transport/driver.hpp"
#include "transport/driver_descriptor.hpp"
#include "transport/setup_util.hpp"

namespace sparcoll::transport {
namespace rdma {
namespace {

constexpr auto kCloseWait = std::chrono::milliseconds(300);

class RdmaDriver final : public Driver {
 public:
  ~RdmaDriver() override {
    // Every channel names the same lost process, so a peer learns it whichever close it reads first.
    std::uint32_t lost = kNoProcess;
    for (auto& channel : channels_)
      if (lost == kNoProcess) lost = channel->lost_process();
    for (auto& channel : channels_) channel->post_close(lost);
    const auto give_up = std::chrono::steady_clock::now() + kCloseWait;
    for (auto& channel : channels_)
      while (!channel->close_done() && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
    channels_.clear();  // before the cache, PD and device they use
    cache_.reset();
  }

  std::string_view name() const override { return "rdma"; }
  Channel& channel(std::uint32_t index) override { return *channels_[index]; }

  Status setup(const DriverContext& ctx);
  bool register_memory(const void* addr, std::size_t len, UserMemory* out) override;
  void forget_memory(const void* addr, std::size_t len) override { cache_->evict(addr, len); }
  void destroy_qps_abruptly() {
    for (auto& channel : channels_) channel->destroy_qps_abruptly();
  }

 private:
  Status exchange_endpoints(const DriverContext& ctx, const SetupDeadline& deadline);

  Device device_;
  std::unique_ptr<MrCache> cache_;
  std::vector<std::unique_ptr<RdmaChannel>> channels_;
  std::atomic<bool> registration_failed_{false};  // after one failure every send copies
};

bool RdmaDriver::register_memory(const void* addr, std::size_t len, UserMemory* out) {
  if (len == 0 || registration_failed_.load(std::memory_order_relaxed)) return false;
  // Local read access only: the NIC reads the buffer, nothing writes to it, so read-only
  // memory registers too.
  MemoryKeys keys;
  const Status status = cache_->get(const_cast<void*>(addr), len, 0, "user buffer", &keys);
  if (!status.ok()) {
    if (!registration_failed_.exchange(true))
      SC_LOG_WARN("rdma zero-copy is off, sends copy into registered staging instead: %s", status.message().c_str());
    return false;
  }
  out->base = static_cast<const std::byte*>(addr);
  out->len = len;
  out->key = keys.lkey;
  return true;
}

Status RdmaDriver::setup(const DriverContext& ctx) {
  const SetupDeadline deadline(ctx.deadline_ms);
  std::vector<DeviceInfo> devices;
  Status status = list_devices(&devices);
  if (!status.ok()) return status;
  PortRequest request;
  request.device = ctx.options->ib_device;
  request.port = ctx.options->ib_port;
  request.gid_index = ctx.options->ib_gid_index;
  PortChoice choice;
  status = choose_port(devices, request, &choice);
  if (!status.ok()) return status;
  status = device_.open(choice);
  if (!status.ok()) return status;
  SC_LOG_DEBUG("rdma driver: %s port %u gid %u (%s, %s), mtu %d", choice.device.c_str(), choice.port, choice.gid_index,
               gid_text(choice.gid).c_str(), gid_type_name(choice.gid_type), 128 << choice.mtu);
  cache_ = std::make_unique<MrCache>(device_.pd());
  for (std::uint32_t c = 0; c < ctx.channels; ++c) {
    std::unique_ptr<RdmaChannel> channel;
    status = RdmaChannel::create(c, ctx, device_, *cache_, &channel);
    if (!status.ok()) return status;
    channels_.push_back(std::move(channel));
  }
  return exchange_endpoints(ctx, deadline);
}

Status RdmaDriver::exchange_endpoints(const DriverContext& ctx, const SetupDeadline& deadline) {
  for (std::size_t i = 0; i < ctx.peers.size(); ++i) {
    std::string lines;
    for (auto& channel : channels_) lines += encode_endpoint(channel->local_endpoint(i)) + "\n";
    Status status = ctx.exchange->publish_to(ctx.peers[i], "qp", lines);
    if (!status.ok()) return status;
  }
  std::vector<std::string> values;
  Status status = read_from_peers(ctx, ctx.peers, "qp", true, deadline, "rdma", "publish their rdma queue pairs", &values);
  if (!status.ok()) return status;
  for (std::size_t i = 0; i < ctx.peers.size(); ++i) {
    const std::string name = process_name(ctx, ctx.peers[i]);
    std::size_t start = 0;
    for (std::uint32_t c = 0; c < ctx.channels; ++c) {
      const std::size_t end = values[i].find('\n', start);
      Endpoint remote;
      if (end == std::string::npos || !decode_endpoint(values[i].substr(start, end - start), &remote))
        return Status(ErrorCode::protocol_error, name + " published a malformed rdma endpoint for channel " +
                                                     std::to_string(c) + " (or fewer channels than this process)");
      start = end + 1;
      status = channels_[c]->connect(i, remote, name);
      if (!status.ok()) return status;
    }
  }
  return wait_for_peers(ctx, ctx.peers, "ready", deadline, "rdma", "connect their rdma queue pairs");
}

}  // namespace

void destroy_qps_abruptly(Driver& driver) {
  if (driver.name() == "rdma") static_cast<RdmaDriver&>(driver).destroy_qps_abruptly();
}

}  // namespace rdma

namespace {

bool rdma_driver_usable(std::string* reason) { return rdma::rdma_device_usable(reason); }

}  // namespace

extern const DriverDescriptor rdma_driver_descriptor{"rdma", 10, &create_and_set_up<rdma::RdmaDriver>, &rdma_driver_usable,
                                                {/*zero_copy=*/true, /*events=*/true, /*reads_peer_memory=*/false, /*recovers_loss=*/false, /*chosen_by_auto=*/true}};

}  // namespace sparcoll::transport
