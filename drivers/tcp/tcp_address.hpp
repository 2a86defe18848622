// Numeric IPv4/IPv6 socket addresses for the tcp driver: "192.0.2.7", "192.0.2.7:4000",
// "::1", "[::1]:4000". Host names are not resolved: ProcessInfo::address and
// SPARCOLL_TCP_ADDR hold IP addresses.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>

#include "sparcoll/status.hpp"

namespace sparcoll::transport::tcp {

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;

  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
  sockaddr* get() { return reinterpret_cast<sockaddr*>(&storage); }
  int family() const { return storage.ss_family; }
  std::uint16_t port() const;
  void set_port(std::uint16_t port);
  bool is_wildcard() const;  // 0.0.0.0 or ::
};

// Parses an IP with an optional port (port 0 when absent). `what` names the source in errors
// ("SPARCOLL_TCP_ADDR", "rank 2's published address").
Status parse_address(const std::string& text, const std::string& what, SocketAddress* out);
// "192.0.2.7:4000" or "[::1]:4000".
std::string format_address(const SocketAddress& address);

}  // namespace sparcoll::transport::tcp
