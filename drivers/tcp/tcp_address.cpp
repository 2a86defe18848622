#include "tcp_address.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <charconv>
#include <cstdio>
#include <cstring>

#include "common/log.hpp"

namespace sparcoll::transport::tcp {

std::uint16_t SocketAddress::port() const {
  if (family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
  return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
}

void SocketAddress::set_port(std::uint16_t port) {
  if (family() == AF_INET6)
    reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port = htons(port);
  else
    reinterpret_cast<sockaddr_in*>(&storage)->sin_port = htons(port);
}

bool SocketAddress::is_wildcard() const {
  if (family() == AF_INET6) {
    const in6_addr& ip = reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr;
    return std::memcmp(&ip, &in6addr_any, sizeof ip) == 0;
  }
  return reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr.s_addr == htonl(INADDR_ANY);
}

Status parse_address(const std::string& text, const std::string& what, SocketAddress* out) {
  if (text.empty()) return Status(ErrorCode::invalid_argument, what + ": empty address");
  std::string host = text;
  std::string port_text;
  if (!text.empty() && text[0] == '[') {
    const std::size_t close = text.find(']');
    if (close == std::string::npos || (close + 1 < text.size() && text[close + 1] != ':'))
      return Status(ErrorCode::invalid_argument, what + ": malformed address '" + log::printable(text) + "'");
    host = text.substr(1, close - 1);
    if (close + 1 < text.size()) port_text = text.substr(close + 2);
  } else if (text.find(':') == text.rfind(':') && text.find(':') != std::string::npos) {
    // Exactly one colon: IPv4 with a port. Several colons without brackets: a bare IPv6 address.
    host = text.substr(0, text.find(':'));
    port_text = text.substr(text.find(':') + 1);
  }
  std::uint16_t port = 0;
  if (!port_text.empty() || text.back() == ':') {
    const char* end = port_text.data() + port_text.size();
    auto [ptr, ec] = std::from_chars(port_text.data(), end, port);
    if (ec != std::errc() || ptr != end || port_text.empty())
      return Status(ErrorCode::invalid_argument, what + ": bad port in address '" + log::printable(text) + "'");
  }
  SocketAddress address;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&address.storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&address.storage);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    address.length = sizeof(sockaddr_in);
  } else if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    address.length = sizeof(sockaddr_in6);
  } else {
    return Status(ErrorCode::invalid_argument, what + ": '" + log::printable(text) + "' is not an IPv4 or IPv6 address");
  }
  address.set_port(port);
  *out = address;
  return Status::Ok();
}

std::string format_address(const SocketAddress& address) {
  char ip[INET6_ADDRSTRLEN] = "?";
  if (address.family() == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&address.storage)->sin6_addr, ip, sizeof ip);
  } else {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&address.storage)->sin_addr, ip, sizeof ip);
  }
  // snprintf rather than string concatenation: g++ 12 warns (-Wrestrict) on the latter here.
  char text[INET6_ADDRSTRLEN + 10];
  std::snprintf(text, sizeof text, address.family() == AF_INET6 ? "[%s]:%u" : "%s:%u", ip, static_cast<unsigned>(address.port()));
  return text;
}

}  // namespace sparcoll::transport::tcp
