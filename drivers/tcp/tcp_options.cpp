// The tcp driver's variables (common/config.hpp, DriverOptionTable).
#include "common/config_rows.hpp"

namespace sparcoll {
namespace {

using namespace config;

std::vector<ConfigVariable> variables() {
  return {
      {"SPARCOLL_TCP_ADDR", "tcp_addr", "(store connection's local address)",
       "address the tcp transport listens on and advertises to its peers.", {},
       &parse_text<&Options::tcp_addr>},
      {"SPARCOLL_TCP_CONGESTION", "tcp_congestion", "auto",
       "congestion control of the tcp transport's connections. auto: connections between processes of one "
       "host use cubic (reno where cubic is not allowed) instead of a pacing algorithm (bbr): loopback has no "
       "queue to protect, and pacing held a 1 MiB allreduce at 0.5 ms instead of 0.3; connections to other "
       "hosts keep the system's choice. system: every connection keeps net.ipv4.tcp_congestion_control. A "
       "name (cubic, reno, ...): every connection uses it, and setup fails if the kernel refuses it.", {},
       &parse_text<&Options::tcp_congestion>},
  };
}

void validate(const Options& o, ConfigProblems& p) {
  // TCP_CA_NAME_MAX is 16 with the terminating NUL; kernel names are lowercase letters, digits, _.
  if (o.tcp_congestion.empty() || o.tcp_congestion.size() > 15 ||
      o.tcp_congestion.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos) {
    p.add("tcp_congestion='" + o.tcp_congestion + "' (SPARCOLL_TCP_CONGESTION) must be auto, system or a kernel "
          "congestion control name (1 to 15 of a-z, 0-9, _; net.ipv4.tcp_available_congestion_control lists them)");
  }
}

}  // namespace

extern const DriverOptionTable tcp_option_table = {"tcp", &variables, &validate};

}  // namespace sparcoll
