#include "control/store_address.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <cctype>
#include <cstring>

namespace sparcoll::control {

Status parse_host_port(const std::string& text, HostPort* out) {
  if (!text.empty() && text.front() == '[') {
    return Status(ErrorCode::unsupported, "store address '" + text +
                                              "': ipv6 addresses are not supported yet, use an ipv4 address or host name");
  }
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
    return Status(ErrorCode::invalid_argument, "store address '" + text + "' is not host:port");
  }
  std::string host = text.substr(0, colon);
  if (host.find(':') != std::string::npos) {
    return Status(ErrorCode::unsupported, "store address '" + text +
                                              "': ipv6 addresses are not supported yet, use an ipv4 address or host name");
  }
  const std::string port_text = text.substr(colon + 1);
  // Strict decimal: "29500x", "+1" and "-1" are typos, not ports.
  if (port_text.size() > 5 || port_text.find_first_not_of("0123456789") != std::string::npos) {
    return Status(ErrorCode::invalid_argument, "store address '" + text + "': port '" + port_text + "' is not a number");
  }
  const unsigned long port = std::stoul(port_text);
  if (port > 65535) {
    return Status(ErrorCode::invalid_argument, "store address '" + text + "': port " + port_text + " is above 65535");
  }
  out->host = std::move(host);
  out->port = static_cast<std::uint16_t>(port);
  return Status::Ok();
}

Status resolve_ipv4(const HostPort& address, bool passive, sockaddr_in* out) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(address.host.c_str(), nullptr, &hints, &found);
  if (rc != 0) {
    const std::string where = address.host + ":" + std::to_string(address.port);
    const ErrorCode code = rc == EAI_AGAIN ? ErrorCode::no_resource : ErrorCode::invalid_argument;
    std::string reason = ::gai_strerror(rc);
    if (!reason.empty()) reason[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(reason[0])));
    return Status(code, "cannot resolve store host '" + address.host + "' (" + where + ") to an ipv4 address: " + reason);
  }
  sockaddr_in result{};
  std::memcpy(&result, found->ai_addr, sizeof result);
  ::freeaddrinfo(found);
  result.sin_port = htons(address.port);
  *out = result;
  return Status::Ok();
}

std::string format_ip(const sockaddr_in& address) {
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &address.sin_addr, text, sizeof text);
  return text;
}

std::string format_ip_port(const sockaddr_in& address) {
  return format_ip(address) + ":" + std::to_string(ntohs(address.sin_port));
}

}  // namespace sparcoll::control
