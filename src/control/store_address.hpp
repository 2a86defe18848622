// "host:port" addresses of the rendezvous store (SPARCOLL_STORE, MASTER_ADDR:MASTER_PORT+1).
// IPv4 only for now: host names resolve through getaddrinfo to an IPv4 address; a bracketed
// IPv6 address ("[::1]:29500") is recognised and refused with a message saying so.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <string>

#include "common/host_port.hpp"
#include "sparcoll/status.hpp"

namespace sparcoll::control {

// Resolves host to one IPv4 socket address. `passive` is for listening sockets (a host of
// "0.0.0.0" binds every interface). A temporary resolver failure (EAI_AGAIN) is
// ErrorCode::no_resource so callers that retry can tell it from a name that does not exist.
Status resolve_ipv4(const HostPort& address, bool passive, sockaddr_in* out);

// "192.0.2.7:29500" and "192.0.2.7".
std::string format_ip_port(const sockaddr_in& address);
std::string format_ip(const sockaddr_in& address);

}  // namespace sparcoll::control
