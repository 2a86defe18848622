#include "dpdk_port.hpp"

#include <arpa/inet.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>

#include "dpdk_eal.hpp"
#include "dpdk_rte.hpp"

namespace sparcoll::transport::dpdk {
namespace {

std::string dpdk_error(int rc) { return rte_strerror(rc < 0 ? -rc : rc); }

// Ports reserved by a driver of this process. Guarded by control_mutex().
std::set<std::uint16_t>& claimed_ports() {
  static auto* ports = new std::set<std::uint16_t>;
  return *ports;
}

std::map<std::uint16_t, std::vector<rte_mempool*>>& parked() {
  static auto* pools = new std::map<std::uint16_t, std::vector<rte_mempool*>>;
  return *pools;
}

// Runs jobs on the EAL's interrupt thread. memif handles its control channels there, and a
// memif port stopped from another thread races with that thread's handling of the same port's
// disconnect (both free its regions and control channel: "EAL: Error: Invalid memory", crashes
// in the interrupt thread). Stopped from the interrupt thread itself, the two never overlap.
class InterruptThread {
 public:
  static InterruptThread& instance() {
    static auto* runner = new InterruptThread;  // never destroyed: the EAL outlives statics
    return *runner;
  }

  // Runs `job` there and waits for it (for 10 s at most: the interrupt thread may be
  // descheduled on a busy machine; a job still queued then owns what it uses and runs later).
  // False if the job could not be queued: then the caller runs it itself.
  bool run(std::function<void()> job) {
    if (!ready_) return false;
    auto entry = std::make_shared<Job>();
    entry->fn = std::move(job);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(entry);
    }
    const std::uint64_t one = 1;
    [[maybe_unused]] ssize_t wrote = write(efd_, &one, sizeof one);  // a full counter still wakes it
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait_for(lock, std::chrono::seconds(10), [&] { return entry->done; });
    return true;
  }

 private:
  struct Job {
    std::function<void()> fn;
    bool done = false;
  };

  InterruptThread() {
    efd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (efd_ < 0) return;
    handle_ = rte_intr_instance_alloc(RTE_INTR_INSTANCE_F_PRIVATE);
    if (handle_ == nullptr || rte_intr_fd_set(handle_, efd_) != 0 || rte_intr_type_set(handle_, RTE_INTR_HANDLE_EXT) != 0)
      return;
    ready_ = rte_intr_callback_register(handle_, &InterruptThread::on_event, this) == 0;
  }

  static void on_event(void* arg) {
    auto* self = static_cast<InterruptThread*>(arg);
    std::uint64_t count = 0;
    [[maybe_unused]] ssize_t got = read(self->efd_, &count, sizeof count);
    for (;;) {
      std::shared_ptr<Job> job;
      {
        std::lock_guard<std::mutex> lock(self->mutex_);
        if (self->queue_.empty()) return;
        job = self->queue_.front();
        self->queue_.pop_front();
      }
      job->fn();
      std::lock_guard<std::mutex> lock(self->mutex_);
      job->done = true;
      self->done_.notify_all();
    }
  }

  int efd_ = -1;
  rte_intr_handle* handle_ = nullptr;
  bool ready_ = false;
  std::mutex mutex_;
  std::condition_variable done_;
  std::deque<std::shared_ptr<Job>> queue_;
};

void close_port_here(PortHandle& port);

std::string port_name(std::uint16_t port) {
  char name[RTE_ETH_NAME_MAX_LEN] = {};
  if (rte_eth_dev_get_name_by_port(port, name) != 0) return "port " + std::to_string(port);
  return name;
}

}  // namespace

Status create_memif_port(const std::string& name, const std::string& args, const std::vector<rte_mempool*>& pools,
                         PortHandle* out, bool* multi_seg) {
  std::lock_guard<std::mutex> lock(control_mutex());
  *multi_seg = false;
  out->name = name;
  if (int rc = rte_vdev_init(name.c_str(), args.c_str()); rc != 0)
    return Status(ErrorCode::system_error, "dpdk: creating memif port " + name + " (" + args + ") failed: " + dpdk_error(rc));
  out->vdev = true;
  if (int rc = rte_eth_dev_get_port_by_name(name.c_str(), &out->id); rc != 0)
    return Status(ErrorCode::internal, "dpdk: memif port " + name + " was created but has no port id: " + dpdk_error(rc));
  const auto queues = static_cast<std::uint16_t>(pools.size());
  rte_eth_conf conf {};
  // Zero-copy sends are chains (headers + the user's bytes); memif copies every segment into
  // its ring and offers the offload, but ask rather than assume.
  rte_eth_dev_info info {};
  if (rte_eth_dev_info_get(out->id, &info) == 0 && (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS) != 0) {
    conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
    *multi_seg = true;
  }
  if (int rc = rte_eth_dev_configure(out->id, queues, queues, &conf); rc != 0)
    return Status(ErrorCode::system_error, "dpdk: configuring memif port " + name + " with " + std::to_string(queues) +
                                               " queue pairs failed: " + dpdk_error(rc));
  for (std::uint16_t q = 0; q < queues; ++q) {
    if (int rc = rte_eth_rx_queue_setup(out->id, q, kRxDescriptors, SOCKET_ID_ANY, nullptr, pools[q]); rc != 0)
      return Status(ErrorCode::system_error, "dpdk: rx queue " + std::to_string(q) + " of memif port " + name +
                                                 " failed: " + dpdk_error(rc));
    if (int rc = rte_eth_tx_queue_setup(out->id, q, kTxDescriptors, SOCKET_ID_ANY, nullptr); rc != 0)
      return Status(ErrorCode::system_error, "dpdk: tx queue " + std::to_string(q) + " of memif port " + name +
                                                 " failed: " + dpdk_error(rc));
  }
  return Status::Ok();
}

bool start_ports(std::vector<PortHandle>& ports) {
  bool all = true;
  for (PortHandle& port : ports) {
    if (port.started || port.closed || !port.vdev) continue;
    std::lock_guard<std::mutex> lock(control_mutex());
    // A memif client whose server does not exist yet fails here (-EPERM or a connect error);
    // the caller retries until its deadline.
    if (rte_eth_dev_start(port.id) == 0) {
      port.started = true;
    } else {
      all = false;
    }
  }
  return all;
}

void restart_port(PortHandle& port) {
  if (!port.started || port.closed || !port.vdev) return;
  const std::uint16_t id = port.id;
  auto stop = [id] {
    std::lock_guard<std::mutex> lock(control_mutex());
    (void)rte_eth_dev_stop(id);
  };
  if (!InterruptThread::instance().run(stop)) stop();
  port.started = false;  // the caller's next start_ports() connects again
}

bool link_up(const PortHandle& port) {
  rte_eth_link link {};
  return rte_eth_link_get_nowait(port.id, &link) == 0 && link.link_status == RTE_ETH_LINK_UP;
}

Status port_facts(std::uint16_t port, PortFacts* out) {
  std::lock_guard<std::mutex> lock(control_mutex());
  if (!rte_eth_dev_is_valid_port(port))
    return Status(ErrorCode::unsupported, "dpdk port " + std::to_string(port) +
                                              " (SPARCOLL_DPDK_PORT) does not exist; the EAL found: " + list_ports());
  rte_eth_dev_info info {};
  if (int rc = rte_eth_dev_info_get(port, &info); rc != 0)
    return Status(ErrorCode::system_error, "dpdk: reading port " + std::to_string(port) + " failed: " + dpdk_error(rc));
  out->name = port_name(port);
  out->driver = info.driver_name != nullptr ? info.driver_name : "?";
  out->max_rx_queues = info.max_rx_queues;
  out->max_tx_queues = info.max_tx_queues;
  rte_ether_addr mac {};
  if (int rc = rte_eth_macaddr_get(port, &mac); rc != 0)
    return Status(ErrorCode::system_error, "dpdk: reading the mac address of port " + out->name + " failed: " + dpdk_error(rc));
  std::memcpy(out->mac.bytes, mac.addr_bytes, 6);
  std::uint16_t mtu = 0;
  out->mtu = rte_eth_dev_get_mtu(port, &mtu) == 0 && mtu != 0 ? mtu : 1500;
  return Status::Ok();
}

std::string list_ports() {
  std::string text;
  std::uint16_t port = 0;
  RTE_ETH_FOREACH_DEV(port) text += (text.empty() ? "" : ", ") + std::to_string(port) + " (" + port_name(port) + ")";
  return text.empty() ? "no port (give a device: --vdev=... or -a <pci address> in SPARCOLL_DPDK_EAL_ARGS)" : text;
}

Status claim_port(std::uint16_t port, PortHandle* out) {
  std::lock_guard<std::mutex> lock(control_mutex());
  if (!claimed_ports().insert(port).second)
    return Status(ErrorCode::unsupported, "dpdk port " + std::to_string(port) + " (" + port_name(port) +
                                              ") is already used by another communicator of this process");
  out->id = port;
  out->name = port_name(port);
  out->claimed = true;
  return Status::Ok();
}

namespace {

// The offloads the port offers that sparcoll uses: rx and tx checksums, multi-segment sends.
void choose_offloads(const rte_eth_dev_info& info, rte_eth_conf* conf, SharedPortSetup* out) {
  const std::uint64_t rx_ck = RTE_ETH_RX_OFFLOAD_IPV4_CKSUM | RTE_ETH_RX_OFFLOAD_UDP_CKSUM;
  if ((info.rx_offload_capa & rx_ck) == rx_ck) {
    conf->rxmode.offloads |= rx_ck;
    out->rx_checksum_offload = true;
  }
  if (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_IPV4_CKSUM) {
    conf->txmode.offloads |= RTE_ETH_TX_OFFLOAD_IPV4_CKSUM;
    out->ip_checksum_offload = true;
    if (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_UDP_CKSUM) {
      conf->txmode.offloads |= RTE_ETH_TX_OFFLOAD_UDP_CKSUM;
      out->udp_checksum_offload = true;
    }
  }
  if (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS) {
    conf->txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
    out->multi_seg_tx = true;
    out->max_tx_segments = info.tx_desc_lim.nb_mtu_seg_max;
  }
}

// Sets up every rx queue (queue q takes channel q % channels's pool) and every tx queue.
Status setup_queues(const PortHandle& port, const rte_eth_dev_info& info, const rte_eth_conf& conf, std::uint16_t rxq,
                    std::uint16_t txq, std::uint32_t channels, const std::vector<rte_mempool*>& pools) {
  const std::string& name = port.name;
  std::uint16_t nb_rx = kRxDescriptors;
  std::uint16_t nb_tx = kTxDescriptors;
  (void)rte_eth_dev_adjust_nb_rx_tx_desc(port.id, &nb_rx, &nb_tx);
  for (std::uint16_t q = 0; q < rxq; ++q) {
    rte_eth_rxconf rxconf = info.default_rxconf;
    rxconf.offloads = conf.rxmode.offloads;
    if (int rc = rte_eth_rx_queue_setup(port.id, q, nb_rx, SOCKET_ID_ANY, &rxconf, pools[q % channels]); rc != 0)
      return Status(ErrorCode::system_error, "dpdk: rx queue " + std::to_string(q) + " of port " + name +
                                                 " failed: " + dpdk_error(rc));
  }
  for (std::uint16_t q = 0; q < txq; ++q) {
    rte_eth_txconf txconf = info.default_txconf;
    txconf.offloads = conf.txmode.offloads;
    if (int rc = rte_eth_tx_queue_setup(port.id, q, nb_tx, SOCKET_ID_ANY, &txconf); rc != 0)
      return Status(ErrorCode::system_error, "dpdk: tx queue " + std::to_string(q) + " of port " + name +
                                                 " failed: " + dpdk_error(rc));
  }
  return Status::Ok();
}

// A rule that steers UDP to ip:udp_port onto rx queue `queue_index`, or null when the port refuses it.
rte_flow* create_steering_rule(const PortHandle& port, std::uint32_t ip, std::uint16_t udp_port, std::uint16_t queue_index) {
  rte_flow_attr attr {};
  attr.ingress = 1;
  rte_flow_item_ipv4 ip_spec {};
  rte_flow_item_ipv4 ip_mask {};
  ip_spec.hdr.dst_addr = htonl(ip);
  ip_mask.hdr.dst_addr = 0xffffffff;
  rte_flow_item_udp udp_spec {};
  rte_flow_item_udp udp_mask {};
  udp_spec.hdr.dst_port = htons(udp_port);
  udp_mask.hdr.dst_port = 0xffff;
  rte_flow_item pattern[4] = {};
  pattern[0].type = RTE_FLOW_ITEM_TYPE_ETH;
  pattern[1].type = RTE_FLOW_ITEM_TYPE_IPV4;
  pattern[1].spec = &ip_spec;
  pattern[1].mask = &ip_mask;
  pattern[2].type = RTE_FLOW_ITEM_TYPE_UDP;
  pattern[2].spec = &udp_spec;
  pattern[2].mask = &udp_mask;
  pattern[3].type = RTE_FLOW_ITEM_TYPE_END;
  rte_flow_action_queue queue {};
  queue.index = queue_index;
  rte_flow_action actions[2] = {};
  actions[0].type = RTE_FLOW_ACTION_TYPE_QUEUE;
  actions[0].conf = &queue;
  actions[1].type = RTE_FLOW_ACTION_TYPE_END;
  rte_flow_error error {};
  if (rte_flow_validate(port.id, &attr, pattern, actions, &error) != 0) return nullptr;
  return rte_flow_create(port.id, &attr, pattern, actions, &error);
}

// A flow rule per channel sends its UDP port to its queue; all or none (a partial set would
// leave some channels' frames on any queue while others read only their own).
bool steer_by_flow_rules(PortHandle& port, std::uint16_t queues, std::uint32_t ip, std::uint16_t udp_base) {
  for (std::uint16_t c = 0; c < queues; ++c) {
    rte_flow* flow = create_steering_rule(port, ip, static_cast<std::uint16_t>(udp_base + c), c);
    if (flow == nullptr) {
      rte_flow_error error {};
      for (rte_flow* f : port.flows) rte_flow_destroy(port.id, f, &error);
      port.flows.clear();
      return false;
    }
    port.flows.push_back(flow);
  }
  return true;
}

}  // namespace

Status configure_shared_port(PortHandle& port, std::uint32_t channels, const std::vector<rte_mempool*>& pools,
                             std::uint32_t ip, std::uint16_t udp_base, SharedPortSetup* out) {
  std::lock_guard<std::mutex> lock(control_mutex());
  const std::string name = port.name;
  rte_eth_dev_info info {};
  if (int rc = rte_eth_dev_info_get(port.id, &info); rc != 0)
    return Status(ErrorCode::system_error, "dpdk: reading port " + name + " failed: " + dpdk_error(rc));
  if (info.max_tx_queues < channels)
    return Status(ErrorCode::unsupported, "dpdk port " + name + " (" + info.driver_name + ") has " +
                                              std::to_string(info.max_tx_queues) + " tx queues, fewer than the " +
                                              std::to_string(channels) +
                                              " channels (SPARCOLL_THREADS + 1 for the collective thread); give "
                                              "the device more queues (net_af_packet: qpairs=N) or use fewer threads");
  const auto txq = static_cast<std::uint16_t>(channels);
  // net_af_packet opens one packet socket per queue pair when the device is created (qpairs=N)
  // and the kernel fans frames out over all of them (by flow hash, rolling over to another
  // socket when one is short of room) whether or not the queue is configured: a queue nobody
  // polls swallows every frame sent to it. A 1-channel process (a dedicated aggregator) on a
  // qpairs=2 device lost whole flows that way once the kernel had rolled them over during a
  // stall. So every such queue is configured and polled (channel c takes c, c + channels, ...).
  const bool every_queue = std::string(info.driver_name) == "net_af_packet" && info.max_rx_queues > channels;
  const std::uint16_t rxq = every_queue ? info.max_rx_queues : info.max_rx_queues >= channels ? txq : 1;
  rte_eth_conf conf {};
  const std::uint64_t rss = info.flow_type_rss_offloads & (RTE_ETH_RSS_NONFRAG_IPV4_UDP | RTE_ETH_RSS_IPV4 | RTE_ETH_RSS_IP);
  if (rxq > 1 && rss != 0) {
    conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
    conf.rx_adv_conf.rss_conf.rss_hf = rss;
  }
  choose_offloads(info, &conf, out);
  if (int rc = rte_eth_dev_configure(port.id, rxq, txq, &conf); rc != 0)
    return Status(ErrorCode::system_error, "dpdk: configuring port " + name + " with " + std::to_string(rxq) + " rx / " +
                                               std::to_string(txq) + " tx queues failed: " + dpdk_error(rc));
  if (Status s = setup_queues(port, info, conf, rxq, txq, channels, pools); !s.ok()) return s;
  if (int rc = rte_eth_dev_start(port.id); rc != 0)
    return Status(ErrorCode::system_error, "dpdk: starting port " + name + " failed: " + dpdk_error(rc));
  port.started = true;
  out->rx_queues = rxq;

  // Steering: a flow rule per channel sends its UDP port to its queue.
  out->steering = std::string(every_queue ? "the kernel's fanout over every af_packet socket"
                               : rxq > 1  ? (conf.rxmode.mq_mode == RTE_ETH_MQ_RX_RSS ? "rss" : "none")
                                          : "one rx queue") +
                  " (every channel reads every queue and forwards frames for another channel)";
  if (rxq > 1 && rxq == txq && steer_by_flow_rules(port, rxq, ip, udp_base)) {
    out->exact_steering = true;
    out->steering = "rte_flow (udp destination port -> the channel's queue)";
  }
  return Status::Ok();
}

void close_port(PortHandle& port) {
  if (port.closed) return;
  if (port.vdev) {
    // memif: on the interrupt thread (see InterruptThread), on a copy the job owns.
    auto job = [copy = port]() mutable { close_port_here(copy); };
    if (!InterruptThread::instance().run(job)) close_port_here(port);
    port.closed = true;
    port.started = false;
    return;
  }
  close_port_here(port);
}

namespace {

void close_port_here(PortHandle& port) {
  std::lock_guard<std::mutex> lock(control_mutex());
  if (port.closed) return;
  port.closed = true;
  if (port.vdev || port.claimed) {
    rte_flow_error error {};
    for (rte_flow* flow : port.flows) rte_flow_destroy(port.id, flow, &error);
    port.flows.clear();
    if (port.started) (void)rte_eth_dev_stop(port.id);
    port.started = false;
    if (port.vdev) {
      (void)rte_eth_dev_close(port.id);
      (void)rte_vdev_uninit(port.name.c_str());
    }
    // A shared device port stays open (stopped) for the next communicator of this process.
    if (port.claimed) claimed_ports().erase(port.id);
  }
}

}  // namespace

void park_pools(std::uint16_t port, std::vector<rte_mempool*> pools) {
  std::lock_guard<std::mutex> lock(control_mutex());
  auto& slot = parked()[port];
  slot.insert(slot.end(), pools.begin(), pools.end());
}

void free_parked_pools(std::uint16_t port) {
  std::lock_guard<std::mutex> lock(control_mutex());
  auto it = parked().find(port);
  if (it == parked().end()) return;
  for (rte_mempool* pool : it->second) rte_mempool_free(pool);
  parked().erase(it);
}

}  // namespace sparcoll::transport::dpdk
