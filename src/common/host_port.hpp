// "host:port" as SPARCOLL_STORE and MASTER_ADDR:MASTER_PORT give it: split and checked here, in
// the lowest layer, because the config table validates it; resolved by the control plane
// (control/store_address.hpp).
#pragma once

#include <cstdint>
#include <string>

#include "sparcoll/status.hpp"

namespace sparcoll {

struct HostPort {
  std::string host;
  std::uint16_t port = 0;
};

// Splits "host:port" (port 0..65535). Errors: invalid_argument for a malformed address,
// unsupported for IPv6 ("[::1]:29500" is recognised and refused with a message saying so).
Status parse_host_port(const std::string& text, HostPort* out);

}  // namespace sparcoll
