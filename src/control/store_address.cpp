#include "control/store_address.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <cctype>
#include <cstring>

namespace sparcoll::control {

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
