// The tcp driver: connections from tcp_setup.cpp, one TcpChannel per channel.
#include <memory>
#include <string>
#include <vector>

#include "tcp_channel.hpp"
#include "tcp_setup.hpp"
#include "transport/driver.hpp"
#include "transport/driver_descriptor.hpp"
#include "transport/setup_util.hpp"

namespace sparcoll::transport {
namespace tcp {
namespace {

class TcpDriver final : public Driver {
 public:
  std::string_view name() const override { return "tcp"; }
  Channel& channel(std::uint32_t index) override { return *channels_[index]; }

  Status setup(const DriverContext& ctx) {
    ConnectionTable connections;
    Status status = establish_connections(ctx, &connections);
    if (!status.ok()) return status;
    for (std::uint32_t channel = 0; channel < ctx.channels; ++channel) {
      std::vector<PeerConnection> peers;
      for (std::size_t i = 0; i < ctx.peers.size(); ++i) {
        PeerConnection peer;
        peer.index = ctx.peers[i];
        peer.label = process_name(ctx, peer.index) + " (" + connections.remote(i, channel) + ")";
        peer.fd = connections.take(i, channel);
        peers.push_back(std::move(peer));
      }
      std::unique_ptr<TcpChannel> made;
      status = TcpChannel::create(channel, ctx.max_message, ctx.processes.size(), std::move(peers), &made);
      if (!status.ok()) return status;
      channels_.push_back(std::move(made));
    }
    return Status::Ok();
  }

 private:
  std::vector<std::unique_ptr<TcpChannel>> channels_;
};

}  // namespace
}  // namespace tcp

extern const DriverDescriptor tcp_driver_descriptor{"tcp", 40, &create_and_set_up<tcp::TcpDriver>, nullptr,
                                                {/*zero_copy=*/false, /*events=*/true, /*reads_peer_memory=*/false, /*recovers_loss=*/false, /*chosen_by_auto=*/true}};

}  // namespace sparcoll::transport
