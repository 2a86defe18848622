// Ports: creating memif links (one per peer pair), configuring a shared device port (one per
// process, steering by rte_flow, RSS or nothing), closing them. Control plane only; every call
// takes control_mutex() itself.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dpdk_rte.hpp"
#include "dpdk_wire.hpp"
#include "sparcoll/status.hpp"

namespace sparcoll::transport::dpdk {

struct PortHandle {
  std::uint16_t id = 0;
  std::string name;          // vdev name (memif) or the device's name
  bool vdev = false;         // we created it: rte_vdev_uninit when closing
  bool started = false;
  bool closed = false;
  bool claimed = false;      // a shared port we reserved in this process
  std::vector<rte_flow*> flows;
};

// Creates memif vdev `name` with devargs `args`, one rx/tx queue pair per channel (rx queue c
// takes its mbufs from pools[c]). Not started yet: the client side can only start once the
// server exists (start_memif_ports retries). *multi_seg: its tx takes chained mbufs
// (RTE_ETH_TX_OFFLOAD_MULTI_SEGS, enabled then).
Status create_memif_port(const std::string& name, const std::string& args, const std::vector<rte_mempool*>& pools,
                         PortHandle* out, bool* multi_seg);
// Starts every created memif port of `ports` not started yet; true when all are started.
bool start_ports(std::vector<PortHandle>& ports);
// Stops a started memif port (on the interrupt thread, like close_port), so that the next
// start_ports() connects it again: for a client whose handshake never completed.
void restart_port(PortHandle& port);
bool link_up(const PortHandle& port);

// What a shared port offers, read before it is configured.
struct PortFacts {
  std::string name;          // "net_af_packet0" or a PCI address
  std::string driver;        // "net_af_packet"
  MacAddr mac;
  std::uint32_t mtu = 1500;
  std::uint16_t max_rx_queues = 0;
  std::uint16_t max_tx_queues = 0;
};
Status port_facts(std::uint16_t port, PortFacts* out);
// "0 (net_af_packet0), 1 (0000:00:08.0)", or "none".
std::string list_ports();
// Reserves `port` for one driver of this process (a port cannot serve two communicators).
Status claim_port(std::uint16_t port, PortHandle* out);

inline constexpr std::uint16_t kRxDescriptors = 1024;
inline constexpr std::uint16_t kTxDescriptors = 1024;

// How a shared port was set up.
struct SharedPortSetup {
  std::uint16_t rx_queues = 1;
  // rte_flow rules put every frame on its channel's queue (c); otherwise a channel's frames can
  // land on any queue.
  bool exact_steering = false;
  bool ip_checksum_offload = false;
  bool udp_checksum_offload = false;
  bool rx_checksum_offload = false;
  bool multi_seg_tx = false;        // RTE_ETH_TX_OFFLOAD_MULTI_SEGS offered (and enabled)
  std::uint16_t max_tx_segments = 0;  // segments per frame the device takes (0: no limit given)
  std::string steering;             // for the log: "rte_flow", "rss", "single queue"
};
// Configures and starts the shared port: `channels` tx queues (one per channel), one rx queue
// per channel when the device has them (else one), checksum offloads where offered, and
// steering: an rte_flow rule per channel (UDP destination port udp_base + c -> queue c), else
// RSS, else nothing (channel 0 polls the only queue); the channels forward what lands wrong.
Status configure_shared_port(PortHandle& port, std::uint32_t channels, const std::vector<rte_mempool*>& pools,
                             std::uint32_t ip, std::uint16_t udp_base, SharedPortSetup* out);

// Stops, closes and (for vdevs) removes the port; releases a claim. Safe to call twice.
void close_port(PortHandle& port);

// A shared device port stays configured after its driver is gone, and a stopped device may
// still hold mbufs in its queues until they are set up again: its pools cannot be freed then.
// They are parked here and freed once the port's queues were set up with new pools.
void park_pools(std::uint16_t port, std::vector<rte_mempool*> pools);
void free_parked_pools(std::uint16_t port);

}  // namespace sparcoll::transport::dpdk
