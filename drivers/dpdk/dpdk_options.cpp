// The dpdk driver's variables (common/config.hpp, DriverOptionTable): built whether or not the
// driver is (it needs libdpdk), so every build knows them.
#include <arpa/inet.h>

#include <array>
#include <string_view>

#include "common/config_rows.hpp"

namespace sparcoll {
namespace {

using namespace config;

constexpr std::array<std::string_view, 2> kMemifZeroCopy = {"auto", "off"};

std::vector<ConfigVariable> variables() {
  return {
      {"SPARCOLL_DPDK_EAL_ARGS", "dpdk_eal_args", "(empty)",
       "arguments appended to the dpdk transport's EAL defaults (--no-huge --single-file-segments -m 1024 --no-pci --no-shconf "
       "--no-telemetry, quiet logs, -l 0; a conflicting argument replaces its default). Without a device the "
       "transport links local processes by memif; with one (--vdev=net_af_packet0,iface=veth0 or -a <pci "
       "address>) it runs on that port. The EAL starts once per process.",
       {}, &parse_text<&Options::dpdk_eal_args>},
      {"SPARCOLL_DPDK_PORT", "dpdk_port", "0", "the dpdk port id the transport uses when the EAL arguments give a device.",
       {}, &parse_nonnegative_u32<&Options::dpdk_port>},
      {"SPARCOLL_DPDK_IP", "dpdk_ip", "(the rendezvous address)",
       "ipv4 address of this process on the dpdk port (port mode), published to its peers.", {},
       &parse_text<&Options::dpdk_ip>},
      {"SPARCOLL_DPDK_UDP_PORT", "dpdk_udp_port", "47000",
       "first udp port of the dpdk transport; channel (thread) c uses this + c.", {},
       &parse_positive_u32<&Options::dpdk_udp_port>},
      {"SPARCOLL_DPDK_DROP_EVERY", "dpdk_drop_every", "0",
       "test hook: the dpdk transport drops every Nth data frame it sends, per channel (retransmissions "
       "included) instead of sending it; 0 = off.",
       {}, &parse_nonnegative_u32<&Options::dpdk_drop_every>},
      {"SPARCOLL_DPDK_MEMIF_ZERO_COPY", "dpdk_memif_zero_copy", "auto",
       "auto: in memif mode, one link per process runs memif zero-copy (the process's link to its lowest-index "
       "peer, when it is that link's client; the server maps its EAL memory, so frames cross with one copy "
       "instead of two); needs the EAL memory in one file (--no-huge --single-file-segments, the defaults). off: "
       "every link copies on both sides.",
       {}, &parse_choice<&Options::dpdk_memif_zero_copy, kMemifZeroCopy>},
  };
}

void validate(const Options& o, ConfigProblems& p) {
  p.check_range("dpdk_port", o.dpdk_port, 0u, 65535u);
  p.check_range("dpdk_udp_port", o.dpdk_udp_port, 1u, 65535u);
  if (!o.dpdk_ip.empty()) {
    in_addr addr{};
    if (inet_pton(AF_INET, o.dpdk_ip.c_str(), &addr) != 1)
      p.add("dpdk_ip='" + o.dpdk_ip + "' (SPARCOLL_DPDK_IP) must be an ipv4 address such as 10.0.0.2");
  }
  p.check_choice("dpdk_memif_zero_copy", o.dpdk_memif_zero_copy, kMemifZeroCopy);
}

}  // namespace

extern const DriverOptionTable dpdk_option_table = {"dpdk", &variables, &validate};

}  // namespace sparcoll
