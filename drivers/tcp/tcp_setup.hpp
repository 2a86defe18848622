// Connection setup of the tcp driver, all inside create_driver and within ctx.deadline_ms.
//
// Every process listens on one port and publishes "ip:port" as "address" (setup exchange).
// For each (peer, channel) there is exactly one connection, opened by the process with the
// lower index: it sends a hello carrying the job token, its process index and the channel;
// the acceptor checks all three and answers accept or reject (tcp_wire.hpp). Everything runs
// in one epoll loop, so a raw socket that connects and sends garbage (or nothing) is dropped
// with a warning while setup carries on; a well-formed hello with a wrong job token fails setup
// with auth_failure on both sides.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sparcoll/status.hpp"
#include "transport/driver.hpp"

namespace sparcoll::transport::tcp {

// The connections setup produced, one per (peer position in ctx.peers, channel). Owns the
// fds until a channel takes them.
class ConnectionTable {
 public:
  ConnectionTable() = default;
  ConnectionTable(std::size_t peers, std::uint32_t channels)
      : channels_(channels), fds_(peers * channels, -1), remotes_(peers * channels) {}
  ConnectionTable(ConnectionTable&&) = default;
  ConnectionTable& operator=(ConnectionTable&&) = default;
  ConnectionTable(const ConnectionTable&) = delete;
  ConnectionTable& operator=(const ConnectionTable&) = delete;
  ~ConnectionTable();

  bool has(std::size_t peer_pos, std::uint32_t channel) const { return fds_[slot(peer_pos, channel)] >= 0; }
  void put(std::size_t peer_pos, std::uint32_t channel, int fd, std::string remote);
  // Hands the fd over to the caller (who closes it from then on).
  int take(std::size_t peer_pos, std::uint32_t channel);
  // "127.0.0.1:40123": the far end of the connection, for messages.
  const std::string& remote(std::size_t peer_pos, std::uint32_t channel) const { return remotes_[slot(peer_pos, channel)]; }

 private:
  std::size_t slot(std::size_t peer_pos, std::uint32_t channel) const { return peer_pos * channels_ + channel; }

  std::uint32_t channels_ = 0;
  std::vector<int> fds_;
  std::vector<std::string> remotes_;
};

// Listens, publishes our address, connects and accepts until every (peer, channel) has a
// handshaken connection or the deadline passes (timeout naming the missing peers and channels).
Status establish_connections(const DriverContext& ctx, ConnectionTable* out);

}  // namespace sparcoll::transport::tcp
