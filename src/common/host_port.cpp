#include "common/host_port.hpp"

namespace sparcoll {

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

}  // namespace sparcoll
