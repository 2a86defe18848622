// The dpdk driver: EAL, addressing, ports, one DpdkChannel per channel, and the close handshake.
//
// Setup, per process (topics of the setup exchange in quotes):
//   1. start the EAL (once per process); memif mode unless its arguments name a device;
//   2. publish "addr": mode, a random per-driver nonce, mac, ip, udp base port,
//      channels and the largest frame this process takes; read every peer's;
//   3. per channel: a mempool and a steering ring;
//   4. memif: one net_memif port per peer (lower index = server) on an abstract socket named
//      from both nonces, one queue pair per channel; start (retried: a client before its server
//      fails) and wait for every link. Port mode: configure the shared port (queues, offloads,
//      rte_flow / RSS steering) and start it;
//   5. publish "ready" and wait for every peer's.
// Teardown: every channel sends FIN and keeps polling until each peer answered FIN_ACK (or its
// link went down), then the port is closed (memif: per peer, as soon as that peer is through).
// What is not through after 100 ms is handed to a background closer that finishes the
// handshake (bounded by the liveness timeout), so a driver destroyed while its peers do not
// poll neither blocks nor pulls a memif link away from under a reader.
//
// Zero-copy (register_memory, then send(…, UserMemory)): memif and the copying vdevs (af_packet,
// tap, pcap) read an mbuf's bytes by virtual address while tx_burst runs, so any user memory
// can be attached as an external buffer: register_memory accepts it as is. A DMA device (a PCI
// NIC) must reach it: rte_extmem_register + rte_dev_dma_map of the covering pages (IOVA = VA
// only); when that fails, or a port does not take multi-segment frames, register_memory
// declines (sends copy) and says why once.
//
// memif zero-copy (SPARCOLL_DPDK_MEMIF_ZERO_COPY, auto by default): on a zero-copy link the
// client (the higher index) shares its EAL memory with the server, so its tx_burst hands the
// server descriptors of our mbufs and its rx_burst gets mbufs the server copied into: the only
// copy per frame is the server's. The client's sends from registered user memory to such a link
// are copied instead of chained (memif 22.11 can only describe the EAL's first memseg list, and
// user memory is not in it); the server's sends chain as before.
// One zero-copy link per process, ever: DPDK 22.11's memif client closes the EAL's own memory
// fd when a zero-copy link disconnects (memif_free_regions), so a second link would hand its
// server a stale descriptor (or one that now names another file; seen as an EAL panic) and
// close that number again when it goes. The first driver with a client link claims it for its
// link to its lowest-index peer; every other link copies as a plain memif pair does.
#define ALLOW_EXPERIMENTAL_API 1  // rte_dev_dma_map / rte_dev_dma_unmap
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include <rte_dev.h>
#include <rte_memory.h>

#include "common/log.hpp"
#include "dpdk_channel.hpp"
#include "dpdk_driver.hpp"
#include "dpdk_eal.hpp"
#include "dpdk_port.hpp"
#include "transport/driver.hpp"
#include "transport/driver_descriptor.hpp"
#include "transport/setup_util.hpp"

namespace sparcoll::transport {
namespace dpdk {
namespace {

using Clock = std::chrono::steady_clock;

// memif links carry jumbo frames: an IP MTU of 9000.
constexpr std::uint32_t kMemifMtu = 9000;
constexpr std::uint32_t kMemifLog2Ring = 10;  // 1024 buffers per ring (memif's default): a full window fits
constexpr auto kCloseWait = std::chrono::milliseconds(100);

std::uint64_t fnv1a64(const std::string& text) {
  std::uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

std::string hex64(std::uint64_t v) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(v));
  return text;
}

std::uint64_t random64() {
  std::random_device device;
  return (std::uint64_t{device()} << 32) ^ device();
}

// Synthetic addresses of memif mode: locally administered mac 02:53:43:xx:xx:xx and 10.x.y.z,
// both from the process index.
MacAddr memif_mac(std::uint32_t index) {
  MacAddr mac;
  const std::uint8_t bytes[6] = {0x02, 0x53, 0x43, static_cast<std::uint8_t>(index >> 16),
                                 static_cast<std::uint8_t>(index >> 8), static_cast<std::uint8_t>(index)};
  std::memcpy(mac.bytes, bytes, 6);
  return mac;
}
std::uint32_t memif_ip(std::uint32_t index) { return (10u << 24) + (index & 0xffffff) + 1; }

// What a process publishes about itself.
struct Identity {
  std::string mode;  // "memif" | "port"
  std::uint64_t nonce = 0;
  MacAddr mac;
  std::uint32_t ip = 0;
  std::uint32_t udp = 0;
  std::uint32_t channels = 0;
  std::uint32_t frame = 0;
};

std::string encode(const Identity& id) {
  return "dpdk1 mode=" + id.mode + " nonce=" + hex64(id.nonce) + " mac=" + mac_text(id.mac) + " ip=" + ip_text(id.ip) +
         " udp=" + std::to_string(id.udp) + " channels=" + std::to_string(id.channels) + " frame=" + std::to_string(id.frame);
}

std::string field_of(const std::string& text, const std::string& name) {
  const std::string key = " " + name + "=";
  const std::size_t at = text.find(key);
  if (at == std::string::npos) return "";
  const std::size_t start = at + key.size();
  return text.substr(start, text.find(' ', start) - start);
}

bool decode(const std::string& text, Identity* out) {
  if (text.rfind("dpdk1 ", 0) != 0) return false;
  out->mode = field_of(text, "mode");
  if (out->mode != "memif" && out->mode != "port") return false;
  try {
    std::size_t used = 0;
    const std::string nonce = field_of(text, "nonce");
    out->nonce = std::stoull(nonce, &used, 16);
    if (used != nonce.size() || nonce.empty()) return false;
    out->udp = static_cast<std::uint32_t>(std::stoul(field_of(text, "udp")));
    out->channels = static_cast<std::uint32_t>(std::stoul(field_of(text, "channels")));
    out->frame = static_cast<std::uint32_t>(std::stoul(field_of(text, "frame")));
  } catch (...) {
    return false;
  }
  return parse_mac(field_of(text, "mac"), &out->mac) && parse_ipv4(field_of(text, "ip"), &out->ip) && out->udp > 0 &&
         out->udp < 65536 && out->frame > kHeadersLen && out->frame <= 65535;
}


std::uint32_t round_up(std::uint32_t v, std::uint32_t to) { return (v + to - 1) / to * to; }

// Everything a driver owns in DPDK; handed to the background closer when its peers are slow.
struct Core {
  bool memif = true;
  std::int32_t memif_zero_copy_link = -1;  // the peer position whose link runs memif zero-copy (top of file)
  bool complete = false;              // setup finished: teardown must be a handshake
  std::vector<PortHandle> ports;      // memif: one per peer position; port mode: one, shared
  std::vector<rte_mempool*> pools;    // by channel
  std::vector<rte_mempool*> ext_pools;  // by channel: mbufs that attach user memory (zero-copy)
  bool multi_seg = true;              // every port takes chained mbufs
  std::vector<rte_ring*> rings;       // by channel
  // Port mode without exact steering: one flag per rx queue, held by the channel reading it.
  std::unique_ptr<std::atomic<bool>[]> rx_readers;
  std::vector<std::unique_ptr<DpdkChannel>> channels;

  ~Core() {
    for (PortHandle& port : ports) close_port(port);
    channels.clear();  // frees the mbufs they hold, drains their rings
    const bool park = !memif && !ports.empty();
    {
      std::lock_guard<std::mutex> lock(control_mutex());
      for (rte_ring* ring : rings) rte_ring_free(ring);
      if (!park)
        for (rte_mempool* pool : pools) rte_mempool_free(pool);
      if (!park)
        for (rte_mempool* pool : ext_pools) rte_mempool_free(pool);
    }
    // A stopped device port may still hold mbufs of these pools in its queues.
    if (park) {
      std::vector<rte_mempool*> all = pools;
      all.insert(all.end(), ext_pools.begin(), ext_pools.end());
      park_pools(ports[0].id, std::move(all));
    }
  }

  void begin_close() {
    for (auto& channel : channels) channel->begin_close();
  }

  // One round of the handshake; true once every port is closed.
  bool close_step() {
    for (auto& channel : channels) channel->close_step();
    bool all_closed = true;
    if (memif) {
      for (std::size_t i = 0; i < ports.size(); ++i) {
        if (ports[i].closed) continue;
        bool finished = true;
        for (auto& channel : channels) finished = finished && channel->peer_finished(i);
        if (!finished) {
          all_closed = false;
          continue;
        }
        close_port(ports[i]);
        for (auto& channel : channels) channel->port_closed(static_cast<std::int32_t>(i));
      }
      return all_closed;
    }
    for (auto& channel : channels)
      for (std::size_t i = 0; i < channel->peer_count(); ++i)
        if (!channel->peer_finished(i)) return false;
    return true;
  }
};

// Finishes the close handshakes of drivers whose destructor could not wait for their peers.
// One thread per process, started on first use, never joined (it may outlive main; it touches
// only what it owns and never logs).
class Closer {
 public:
  static Closer& instance() {
    static Closer* closer = new Closer;
    return *closer;
  }

  void adopt(std::unique_ptr<Core> core, Clock::time_point give_up) {
    std::lock_guard<std::mutex> lock(mutex_);
    incoming_.push_back(Item{std::move(core), give_up});
    if (!started_) {
      started_ = true;
      std::thread([this] { run(); }).detach();
    }
    wake_.notify_one();
  }

 private:
  struct Item {
    std::unique_ptr<Core> core;
    Clock::time_point give_up;
  };

  void run() {
    std::vector<Item> items;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        if (items.empty()) wake_.wait(lock, [this] { return !incoming_.empty(); });
        for (Item& item : incoming_) items.push_back(std::move(item));
        incoming_.clear();
      }
      for (std::size_t i = 0; i < items.size();) {
        if (items[i].core->close_step() || Clock::now() >= items[i].give_up) {
          items[i].core.reset();  // closes whatever is left
          items[i] = std::move(items.back());
          items.pop_back();
        } else {
          ++i;
        }
      }
      if (!items.empty()) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Item> incoming_;
  bool started_ = false;
};

std::atomic<std::uint32_t> g_object_counter{0};
std::atomic<bool> g_memif_zero_copy_claimed{false};  // see "One zero-copy link per process" above

// What the peers published, checked against this process: one Identity per peer (in ctx.peers
// order), and the smallest frame any of them takes.
struct PeerIdentities {
  std::vector<Identity> peers;
  std::uint32_t frame = 0;
};

// The largest message a frame carries, and the note errors about bigger messages append.
struct MessageLimit {
  std::uint32_t max_message = 0;
  std::string note;
};

class DpdkDriver final : public Driver {
 public:
  ~DpdkDriver() override {
    if (!core_) return;
    if (!core_->complete) {
      core_.reset();  // nobody exchanged traffic yet: close at once
      return;
    }
    core_->begin_close();
    const auto give_up = Clock::now() + kCloseWait;
    while (!core_->close_step()) {
      if (Clock::now() >= give_up) {
        Closer::instance().adopt(std::move(core_), Clock::now() + std::chrono::milliseconds(linger_ms_));
        return;
      }
      std::this_thread::yield();
    }
    core_.reset();
  }

  std::string_view name() const override { return "dpdk"; }
  Channel& channel(std::uint32_t index) override { return *core_->channels[index]; }
  bool register_memory(const void* addr, std::size_t len, UserMemory* out) override;
  void forget_memory(const void* addr, std::size_t len) override;

  Status setup(const DriverContext& ctx);
  DpdkChannel& dpdk_channel(std::uint32_t index) { return *core_->channels[index]; }
  const char* mode() const { return core_->memif ? "memif" : "port"; }

 private:
  Status local_identity(const DriverContext& ctx, Identity* me, PortFacts* facts);
  Status create_pools(const DriverContext& ctx, std::uint32_t frame, std::uint16_t rx_descriptors);
  Status open_memif_ports(const DriverContext& ctx, const Identity& me, const std::vector<Identity>& peers,
                          const SetupDeadline& deadline);
  Status create_memif_link(const DriverContext& ctx, const Identity& me, const Identity& them, std::size_t i);
  // setup()'s steps, in order.
  void choose_memif_zero_copy_link(const DriverContext& ctx, const EalState& eal);
  Status exchange_identities(const DriverContext& ctx, const Identity& me, const SetupDeadline& deadline,
                             PeerIdentities* out);
  MessageLimit message_limit(const DriverContext& ctx, const Identity& me, std::uint32_t frame);
  Status bring_up_ports(const DriverContext& ctx, const Identity& me, const PortFacts& facts,
                        const PeerIdentities& theirs, const SetupDeadline& deadline, SharedPortSetup* shared);
  void choose_zero_copy(const SharedPortSetup& shared, const PortFacts& facts);
  ChannelSetup channel_setup(const DriverContext& ctx, std::uint32_t c, const Identity& me,
                             const std::vector<Identity>& peers, const SharedPortSetup& shared,
                             const MessageLimit& limit);

  bool map_for_dma(const void* addr, std::size_t len);
  void decline_zero_copy(const std::string& why);

  std::unique_ptr<Core> core_;
  std::uint32_t linger_ms_ = 30000;
  // Zero-copy: none (declined: zero_copy_off_ says why), copying (the device reads by virtual
  // address at tx_burst) or dma (user pages are registered and mapped for the device).
  enum class ZeroCopy : std::uint8_t { none, copying, dma };
  ZeroCopy zero_copy_ = ZeroCopy::none;
  std::string zero_copy_off_ = "the driver is not set up";
  std::uint16_t dma_port_ = 0;
  std::mutex dma_mutex_;
  struct DmaRange {
    std::uintptr_t begin, end;  // page aligned
    std::size_t users;
  };
  std::vector<DmaRange> dma_ranges_;
  std::atomic<bool> declined_logged_{false};
};

void DpdkDriver::decline_zero_copy(const std::string& why) {
  if (!declined_logged_.exchange(true))
    SC_LOG_WARN("dpdk zero-copy is off, sends from registered buffers copy instead: %s", why.c_str());
}

bool DpdkDriver::register_memory(const void* addr, std::size_t len, UserMemory* out) {
  if (addr == nullptr || len == 0) return false;
  if (zero_copy_ == ZeroCopy::none) {
    decline_zero_copy(zero_copy_off_);
    return false;
  }
  if (zero_copy_ == ZeroCopy::dma && !map_for_dma(addr, len)) return false;
  out->base = static_cast<const std::byte*>(addr);
  out->len = len;
  out->key = 0;
  return true;
}

bool DpdkDriver::map_for_dma(const void* addr, std::size_t len) {
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const std::uintptr_t begin = reinterpret_cast<std::uintptr_t>(addr) & ~(page - 1);
  const std::uintptr_t end = (reinterpret_cast<std::uintptr_t>(addr) + len + page - 1) & ~(page - 1);
  std::lock_guard<std::mutex> lock(dma_mutex_);
  for (DmaRange& r : dma_ranges_) {
    if (begin >= r.begin && end <= r.end) {
      ++r.users;
      return true;
    }
  }
  if (rte_eal_iova_mode() != RTE_IOVA_VA) {
    decline_zero_copy("the EAL runs with physical IOVAs (IOVA as PA): user memory has no IOVA a device can use");
    return false;
  }
  // IOVA = VA: the iova table may stay empty; the device gets the mapping from rte_dev_dma_map.
  if (rte_extmem_register(reinterpret_cast<void*>(begin), end - begin, nullptr, 0, page) != 0 && rte_errno != EEXIST) {
    decline_zero_copy(std::string("rte_extmem_register of a user buffer failed: ") + rte_strerror(rte_errno) +
                      " (it may overlap a buffer registered before)");
    return false;
  }
  rte_eth_dev_info info {};
  if (rte_eth_dev_info_get(dma_port_, &info) != 0 || info.device == nullptr ||
      rte_dev_dma_map(info.device, reinterpret_cast<void*>(begin), begin, end - begin) != 0) {
    const std::string why = rte_strerror(rte_errno);
    rte_extmem_unregister(reinterpret_cast<void*>(begin), end - begin);
    decline_zero_copy("rte_dev_dma_map of a user buffer failed for port " + std::to_string(dma_port_) + ": " + why);
    return false;
  }
  dma_ranges_.push_back(DmaRange{begin, end, 1});
  return true;
}

void DpdkDriver::forget_memory(const void* addr, std::size_t len) {
  if (zero_copy_ != ZeroCopy::dma) return;
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const std::uintptr_t begin = reinterpret_cast<std::uintptr_t>(addr) & ~(page - 1);
  const std::uintptr_t end = (reinterpret_cast<std::uintptr_t>(addr) + len + page - 1) & ~(page - 1);
  std::lock_guard<std::mutex> lock(dma_mutex_);
  for (std::size_t i = 0; i < dma_ranges_.size(); ++i) {
    DmaRange& r = dma_ranges_[i];
    if (begin < r.begin || end > r.end || --r.users > 0) continue;
    rte_eth_dev_info info {};
    if (rte_eth_dev_info_get(dma_port_, &info) == 0 && info.device != nullptr)
      rte_dev_dma_unmap(info.device, reinterpret_cast<void*>(r.begin), r.begin, r.end - r.begin);
    rte_extmem_unregister(reinterpret_cast<void*>(r.begin), r.end - r.begin);
    dma_ranges_.erase(dma_ranges_.begin() + static_cast<std::ptrdiff_t>(i));
    return;
  }
}

Status DpdkDriver::local_identity(const DriverContext& ctx, Identity* me, PortFacts* facts) {
  const Options& o = *ctx.options;
  me->nonce = random64();
  me->channels = ctx.channels;
  if (o.dpdk_udp_port == 0 || std::uint64_t{o.dpdk_udp_port} + ctx.channels - 1 > 65535)
    return Status(ErrorCode::invalid_argument, "dpdk_udp_port=" + std::to_string(o.dpdk_udp_port) +
                                                   " (SPARCOLL_DPDK_UDP_PORT): channels use ports " +
                                                   std::to_string(o.dpdk_udp_port) + " to " +
                                                   std::to_string(std::uint64_t{o.dpdk_udp_port} + ctx.channels - 1) +
                                                   ", which must lie between 1 and 65535");
  me->udp = o.dpdk_udp_port;
  const std::uint32_t wanted = ctx.max_message + static_cast<std::uint32_t>(kHeadersLen);
  if (core_->memif) {
    me->mode = "memif";
    me->mac = memif_mac(ctx.self);
    me->ip = memif_ip(ctx.self);
    me->frame = std::min(wanted, kMemifMtu + static_cast<std::uint32_t>(kEthLen));
    return Status::Ok();
  }
  me->mode = "port";
  if (o.dpdk_port > 0xffff)
    return Status(ErrorCode::invalid_argument, "dpdk_port=" + std::to_string(o.dpdk_port) + " (SPARCOLL_DPDK_PORT) is not a port id");
  const auto port = static_cast<std::uint16_t>(o.dpdk_port);
  Status status = port_facts(port, facts);
  if (!status.ok()) return status;
  me->mac = facts->mac;
  const std::string ip_source = o.dpdk_ip.empty() ? ctx.processes[ctx.self].address : o.dpdk_ip;
  if (!parse_ipv4(ip_source, &me->ip))
    return Status(ErrorCode::invalid_argument,
                  "the dpdk transport needs this process's ipv4 address on port " + facts->name + ": '" + ip_source +
                      "' " + (o.dpdk_ip.empty() ? "(its rendezvous address) " : "(SPARCOLL_DPDK_IP) ") +
                      "is not one; set SPARCOLL_DPDK_IP");
  if (facts->mtu < kHeadersLen - kEthLen + 64)
    return Status(ErrorCode::unsupported, "dpdk port " + facts->name + " has an mtu of " + std::to_string(facts->mtu) +
                                              " bytes, too small for the dpdk transport's headers");
  me->frame = std::min(wanted, facts->mtu + static_cast<std::uint32_t>(kEthLen));
  return Status::Ok();
}

Status DpdkDriver::create_pools(const DriverContext& ctx, std::uint32_t frame, std::uint16_t rx_descriptors) {
  const std::uint32_t peers = static_cast<std::uint32_t>(ctx.peers.size());
  // Retained sends and held receives (a window each per peer), the messages one poll hands
  // out, frames other channels forward into this one's ring (port mode: from this pool into
  // every ring), device descriptors, and slack for bursts and control frames.
  std::uint32_t count = peers * 2 * window_for(peers) + kMaxDeliver + kRingSize + 4 * kBurst + 512;
  if (!core_->memif) count += rx_descriptors + kTxDescriptors + ctx.channels * kRingSize;
  // A memif zero-copy client keeps its rx ring stocked with our mbufs (one per ring slot) for
  // the server to copy into.
  if (core_->memif_zero_copy_link >= 0) count += 1u << kMemifLog2Ring;
  // Parked in per-lcore caches (up to 1.5x kPoolCache each): the channel's own thread and the
  // closer's at teardown; in port mode every channel's thread, since steering hands a frame
  // from this pool to another channel, which frees it. (Sizing for every thread in memif mode
  // too ran a 4-process test cluster out of the EAL's 512 MB.)
  const std::uint32_t holders = core_->memif ? 2 : ctx.channels + 1;
  const std::uint32_t cached = holders * (kPoolCache * 3 / 2);
  count += cached;
  // At least 2 KiB: some PMDs insist that a whole device frame fits one mbuf whatever the MTU
  // (af_packet: its framesz, 2048 by default, less its own header).
  const std::uint32_t data_room = RTE_PKTMBUF_HEADROOM + std::max<std::uint32_t>(round_up(frame, 64), 2048);
  std::lock_guard<std::mutex> lock(control_mutex());
  for (std::uint32_t c = 0; c < ctx.channels; ++c) {
    const std::uint32_t id = g_object_counter.fetch_add(1);
    const std::string pool_name = "scdp" + std::to_string(id);
    rte_mempool* pool = rte_pktmbuf_pool_create(pool_name.c_str(), count, kPoolCache, 0, static_cast<std::uint16_t>(data_room),
                                                SOCKET_ID_ANY);
    if (pool == nullptr)
      return Status(ErrorCode::no_resource, "dpdk: cannot create a pool of " + std::to_string(count) + " mbufs of " +
                                                std::to_string(data_room) + " bytes for channel " + std::to_string(c) +
                                                ": " + rte_strerror(rte_errno) +
                                                " (the EAL's memory, -m in SPARCOLL_DPDK_EAL_ARGS, may be too small)");
    core_->pools.push_back(pool);
    // Attaching user memory needs an mbuf per in-place part: up to a window per peer of them
    // retained, with their shared info in their own data room (a few bytes).
    const std::string ext_name = "scdx" + std::to_string(id);
    const std::uint32_t ext_count = peers * 2 * window_for(peers) + 4 * kBurst + 512 + cached;
    rte_mempool* ext = rte_pktmbuf_pool_create(ext_name.c_str(), ext_count, kPoolCache, 0, 64, SOCKET_ID_ANY);
    if (ext == nullptr)
      return Status(ErrorCode::no_resource, "dpdk: cannot create a pool of " + std::to_string(ext_count) +
                                                " small mbufs for zero-copy sends of channel " + std::to_string(c) + ": " +
                                                rte_strerror(rte_errno));
    core_->ext_pools.push_back(ext);
    const std::string ring_name = "scdr" + std::to_string(id);
    rte_ring* ring = rte_ring_create(ring_name.c_str(), kRingSize, SOCKET_ID_ANY, RING_F_SC_DEQ);
    if (ring == nullptr)
      return Status(ErrorCode::no_resource, "dpdk: cannot create the steering ring of channel " + std::to_string(c) +
                                                ": " + rte_strerror(rte_errno));
    core_->rings.push_back(ring);
  }
  return Status::Ok();
}

Status DpdkDriver::create_memif_link(const DriverContext& ctx, const Identity& me, const Identity& them, std::size_t i) {
  const std::uint32_t peer = ctx.peers[i];
  const bool server = ctx.self < peer;
  const std::uint32_t lo = server ? ctx.self : peer;
  const std::uint32_t hi = server ? peer : ctx.self;
  const std::uint64_t nonce_lo = server ? me.nonce : them.nonce;
  const std::uint64_t nonce_hi = server ? them.nonce : me.nonce;
  const std::uint64_t pair = fnv1a64(ctx.options->job_token + "\n" + ctx.job_id + "\n" + hex64(nonce_lo) + "\n" +
                                     hex64(nonce_hi) + "\n" + std::to_string(lo) + "\n" + std::to_string(hi));
  const std::string socket = "/sparcoll-" + hex64(pair) + "-" + std::to_string(lo) + "-" + std::to_string(hi);
  const std::string name = "net_memif_" + hex64(pair).substr(0, 12) + "_" + std::to_string(ctx.self) + "_" + std::to_string(peer);
  const std::uint32_t bsize = round_up(std::min(me.frame, them.frame), 128);
  const std::string args = "id=0,role=" + std::string(server ? "server" : "client") + ",socket=" + socket +
                           ",bsize=" + std::to_string(bsize) + ",rsize=" + std::to_string(kMemifLog2Ring) +
                           ",mac=" + mac_text(me.mac) +
                           (static_cast<std::int32_t>(i) == core_->memif_zero_copy_link ? ",zero-copy=yes" : "");
  bool multi_seg = false;
  Status status = create_memif_port(name, args, core_->pools, &core_->ports[i], &multi_seg);
  if (!multi_seg) core_->multi_seg = false;
  return status;
}

Status DpdkDriver::open_memif_ports(const DriverContext& ctx, const Identity& me, const std::vector<Identity>& peers,
                                    const SetupDeadline& deadline) {
  core_->ports.resize(ctx.peers.size());
  // Servers first: memif keeps one socket object per socket name per process, so a client vdev
  // created before its server in the same process (the test harness runs several "processes"
  // in one) would leave nobody listening; and a server whose port is not started yet refuses
  // the client's handshake ("ID not found"), after which the client never tries again. Clients
  // are created and started once their servers said they are started.
  std::vector<std::uint32_t> servers;  // my peers that are the server of our link
  for (std::uint32_t peer : ctx.peers)
    if (peer < ctx.self) servers.push_back(peer);
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1) {
      Status status = wait_for_peers(ctx, servers, "memif-servers", deadline, "dpdk", "start their memif servers");
      if (!status.ok()) return status;
    }
    for (std::size_t i = 0; i < ctx.peers.size(); ++i) {
      const bool server = ctx.self < ctx.peers[i];
      if (server != (pass == 0)) continue;
      Status status = create_memif_link(ctx, me, peers[i], i);
      if (!status.ok()) return status;
    }
    // A server start only enables it; a client start connects to its server, which exists and
    // is started by now. A client refused anyway (say, by a server of an earlier incarnation)
    // shows as a link that never comes up: setup then fails naming the peer.
    (void)start_ports(core_->ports);
  }
  // Wait for every link (memif's handshake runs on the EAL's interrupt thread). A client start
  // that could not connect is retried; a client whose handshake has not completed after 2 s
  // (seen once in hundreds of runs on a loaded machine) is stopped and connects again.
  constexpr auto kHandshakeWait = std::chrono::seconds(2);
  std::vector<Clock::time_point> started_at(core_->ports.size(), Clock::now());
  for (;;) {
    for (std::size_t i = 0; i < core_->ports.size(); ++i) {
      PortHandle& port = core_->ports[i];
      const bool client = ctx.self > ctx.peers[i];
      if (client && port.started && !link_up(port) && Clock::now() - started_at[i] > kHandshakeWait) {
        SC_LOG_INFO("dpdk: the memif link to %s is not up %lld ms after connecting; connecting again",
                    process_name(ctx, ctx.peers[i]).c_str(),
                    static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started_at[i]).count()));
        restart_port(port);
      }
    }
    std::vector<bool> was_started;
    for (const PortHandle& port : core_->ports) was_started.push_back(port.started);
    (void)start_ports(core_->ports);
    for (std::size_t i = 0; i < core_->ports.size(); ++i)
      if (!was_started[i] && core_->ports[i].started) started_at[i] = Clock::now();
    std::vector<std::uint32_t> down;
    for (std::size_t i = 0; i < core_->ports.size(); ++i)
      if (!core_->ports[i].started || !link_up(core_->ports[i])) down.push_back(ctx.peers[i]);
    if (down.empty()) return Status::Ok();
    if (deadline.expired())
      return Status(ErrorCode::timeout, "dpdk setup timed out after " + std::to_string(deadline.total_ms()) +
                                            " ms waiting for the memif links to " + process_list(ctx, down) + " to come up");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

Status DpdkDriver::setup(const DriverContext& ctx) {
  const SetupDeadline deadline(ctx.deadline_ms);
  const Options& o = *ctx.options;
  linger_ms_ = ctx.deadline_ms;
  const EalState& eal = start_eal(o.dpdk_eal_args);
  if (!eal.status.ok()) return eal.status;
  core_ = std::make_unique<Core>();
  core_->memif = !eal.has_device;
  choose_memif_zero_copy_link(ctx, eal);

  Identity me;
  PortFacts facts;
  Status status = local_identity(ctx, &me, &facts);
  if (!status.ok()) return status;
  if (!core_->memif) {
    core_->ports.resize(1);
    status = claim_port(static_cast<std::uint16_t>(o.dpdk_port), &core_->ports[0]);
    if (!status.ok()) {
      core_->ports.clear();
      return status;
    }
  }
  PeerIdentities theirs;
  status = exchange_identities(ctx, me, deadline, &theirs);
  if (!status.ok()) return status;
  const MessageLimit limit = message_limit(ctx, me, theirs.frame);

  status = create_pools(ctx, me.frame, kRxDescriptors);
  if (!status.ok()) return status;
  SharedPortSetup shared;
  status = bring_up_ports(ctx, me, facts, theirs, deadline, &shared);
  if (!status.ok()) return status;
  choose_zero_copy(shared, facts);
  for (std::uint32_t c = 0; c < ctx.channels; ++c)
    core_->channels.push_back(std::make_unique<DpdkChannel>(channel_setup(ctx, c, me, theirs.peers, shared, limit)));

  // Every peer's ports are up before any frame is sent to them.
  status = wait_for_peers(ctx, ctx.peers, "ready", deadline, "dpdk", "bring up their dpdk ports");
  if (!status.ok()) return status;
  core_->complete = true;
  return Status::Ok();
}

// memif zero-copy for the link to the lowest-index peer, if this process is its client.
void DpdkDriver::choose_memif_zero_copy_link(const DriverContext& ctx, const EalState& eal) {
  const auto lowest = std::min_element(ctx.peers.begin(), ctx.peers.end());
  if (!core_->memif || ctx.options->dpdk_memif_zero_copy != "auto" || lowest == ctx.peers.end() || *lowest > ctx.self)
    return;
  if (!eal.shareable_memory)
    SC_LOG_INFO("dpdk: memif zero-copy is off: the EAL's memory is not one shareable file (that needs --no-huge "
                "--single-file-segments; the EAL runs with '%s')",
                join_args(eal.args).c_str());
  else if (g_memif_zero_copy_claimed.exchange(true))
    SC_LOG_INFO("dpdk: memif zero-copy is off for these links: an earlier link of this process had it (one per "
                "process: DPDK 22.11's memif closes the EAL's memory fd when a zero-copy link goes)");
  else
    core_->memif_zero_copy_link = static_cast<std::int32_t>(lowest - ctx.peers.begin());
}

// Publishes this process's address and reads every peer's: same mode, same channel count.
Status DpdkDriver::exchange_identities(const DriverContext& ctx, const Identity& me, const SetupDeadline& deadline,
                                       PeerIdentities* out) {
  Status status = ctx.exchange->publish("addr", encode(me));
  if (!status.ok()) return status;
  std::vector<std::string> values;
  status = read_from_peers(ctx, ctx.peers, "addr", false, deadline, "dpdk", "publish their dpdk addresses", &values);
  if (!status.ok()) return status;
  out->peers.assign(ctx.peers.size(), Identity{});
  out->frame = me.frame;
  for (std::size_t i = 0; i < ctx.peers.size(); ++i) {
    const std::string name = process_name(ctx, ctx.peers[i]);
    Identity& them = out->peers[i];
    if (!decode(values[i], &them))
      return Status(ErrorCode::protocol_error,
                    name + " published a malformed dpdk address: '" + log::printable(values[i]) + "'");
    if (them.mode != me.mode)
      return Status(ErrorCode::mismatch, name + " runs the dpdk transport in " + them.mode + " mode, this process in " +
                                             me.mode + " mode (SPARCOLL_DPDK_EAL_ARGS differ: a device gives port mode)");
    if (them.channels != me.channels)
      return Status(ErrorCode::mismatch, name + " has " + std::to_string(them.channels) + " dpdk channels, this process " +
                                             std::to_string(me.channels) + " (SPARCOLL_THREADS differ)");
    out->frame = std::min(out->frame, them.frame);
  }
  return Status::Ok();
}

MessageLimit DpdkDriver::message_limit(const DriverContext& ctx, const Identity& me, std::uint32_t frame) {
  MessageLimit limit;
  limit.max_message = std::min<std::uint32_t>(ctx.max_message, frame - static_cast<std::uint32_t>(kHeadersLen));
  if (limit.max_message < ctx.max_message) {
    limit.note = " (one frame of at most " + std::to_string(frame) + " bytes carries " +
                 std::to_string(limit.max_message) + " bytes of message: set SPARCOLL_MAX_MESSAGE to at most " +
                 std::to_string(limit.max_message) + ")";
    SC_LOG_INFO("dpdk: messages are limited to %u bytes (frames of %u bytes, %s mode), below max_message=%u "
                "(SPARCOLL_MAX_MESSAGE)",
                limit.max_message, frame, me.mode.c_str(), ctx.max_message);
  }
  return limit;
}

// memif: one link per peer; port mode: the claimed port, its queues and steering (`shared`).
Status DpdkDriver::bring_up_ports(const DriverContext& ctx, const Identity& me, const PortFacts& facts,
                                  const PeerIdentities& theirs, const SetupDeadline& deadline,
                                  SharedPortSetup* shared) {
  if (core_->memif) {
    const Status status = open_memif_ports(ctx, me, theirs.peers, deadline);
    if (!status.ok()) return status;
    const std::int32_t zc = core_->memif_zero_copy_link;
    SC_LOG_INFO("dpdk: memif mode, %zu links, %u queue pairs each (one per channel), frames up to %u bytes, memif "
                "zero-copy %s",
                core_->ports.size(), ctx.channels, theirs.frame,
                zc >= 0 ? ("on the link to " + process_name(ctx, ctx.peers[static_cast<std::size_t>(zc)])).c_str() : "off");
    return Status::Ok();
  }
  const Status status = configure_shared_port(core_->ports[0], ctx.channels, core_->pools, me.ip,
                                              static_cast<std::uint16_t>(me.udp), shared);
  if (!status.ok()) return status;
  core_->rx_readers = std::make_unique<std::atomic<bool>[]>(shared->rx_queues);
  free_parked_pools(core_->ports[0].id);
  SC_LOG_INFO("dpdk: port mode on port %u (%s, %s), %s %s:%u, %u rx / %u tx queues, steering: %s; checksum offload "
              "ip %s udp %s rx %s; frames up to %u bytes",
              core_->ports[0].id, facts.name.c_str(), facts.driver.c_str(), mac_text(me.mac).c_str(),
              ip_text(me.ip).c_str(), me.udp, shared->rx_queues, ctx.channels, shared->steering.c_str(),
              shared->ip_checksum_offload ? "yes" : "no", shared->udp_checksum_offload ? "yes" : "no",
              shared->rx_checksum_offload ? "yes" : "no", theirs.frame);
  return Status::Ok();
}

// Zero-copy sends: chains of mbufs, some attached to user memory (see the top of this file).
void DpdkDriver::choose_zero_copy(const SharedPortSetup& shared, const PortFacts& facts) {
  if (core_->memif) {
    core_->multi_seg = core_->multi_seg && !core_->ports.empty();
    if (core_->multi_seg) zero_copy_ = ZeroCopy::copying;
    else zero_copy_off_ = "a memif port does not offer RTE_ETH_TX_OFFLOAD_MULTI_SEGS";
  } else if (!shared.multi_seg_tx) {
    zero_copy_off_ = "port " + facts.name + " (" + facts.driver + ") does not offer RTE_ETH_TX_OFFLOAD_MULTI_SEGS";
  } else if (facts.driver == "net_af_packet" || facts.driver == "net_tap" || facts.driver == "net_pcap") {
    zero_copy_ = ZeroCopy::copying;
  } else if (facts.driver == "net_ring" || facts.driver == "net_null") {
    zero_copy_off_ = "port " + facts.name + " (" + facts.driver + ") hands mbufs on instead of transmitting them";
  } else {
    zero_copy_ = ZeroCopy::dma;
    dma_port_ = core_->ports[0].id;
  }
}

// Channel c's setup: its pools, where it reads and sends, and one PeerSetup per peer.
ChannelSetup DpdkDriver::channel_setup(const DriverContext& ctx, std::uint32_t c, const Identity& me,
                                       const std::vector<Identity>& peers, const SharedPortSetup& shared,
                                       const MessageLimit& limit) {
  const Options& o = *ctx.options;
  ChannelSetup cs;
  cs.index = c;
  cs.channels = ctx.channels;
  cs.self = ctx.self;
  cs.processes = static_cast<std::uint32_t>(ctx.processes.size());
  cs.mac = me.mac;
  cs.ip = me.ip;
  cs.udp_port = static_cast<std::uint16_t>(me.udp + c);
  cs.max_message = limit.max_message;
  cs.window = window_for(static_cast<std::uint32_t>(ctx.peers.size()));
  cs.limit_note = limit.note;
  cs.drop_every = o.dpdk_drop_every;
  cs.liveness_ms = ctx.deadline_ms;
  cs.memif = core_->memif;
  cs.ip_checksum_offload = shared.ip_checksum_offload;
  cs.udp_checksum_offload = shared.udp_checksum_offload;
  cs.rx_checksum_offload = shared.rx_checksum_offload;
  cs.pool = core_->pools[c];
  cs.ext_pool = core_->ext_pools[c];
  cs.zero_copy = zero_copy_ != ZeroCopy::none;
  if (!core_->memif && shared.max_tx_segments > 1)
    cs.max_segments = std::min<std::uint16_t>(kMaxSegments, shared.max_tx_segments);
  cs.rings = core_->rings;
  if (core_->memif) {
    for (std::size_t i = 0; i < ctx.peers.size(); ++i) {
      cs.rx.push_back(RxSource{core_->ports[i].id, static_cast<std::uint16_t>(c), static_cast<std::int32_t>(i)});
      // Per peer: a window of data, its control frames, slack.
      cs.targets.push_back(TxTarget{core_->ports[i].id, static_cast<std::uint16_t>(c), static_cast<std::int32_t>(i), cs.window + 16});
    }
  } else {
    // With rte_flow rules a channel's frames arrive on its own queue. Otherwise (RSS, the
    // kernel's fanout behind net_af_packet, a single queue) they can land on any queue, and
    // the channel that owns that queue may not poll for a long time: the collective thread
    // sleeps between calls, and a dedicated aggregator never polls its second channel. A
    // 5%-loss test lost whole flows that way (af_packet had moved them onto the idle
    // channel's socket). So each channel reads every queue, one reader at a
    // time, and forwards what belongs to another channel.
    for (std::uint32_t q = c; q < shared.rx_queues; q += ctx.channels)
      cs.rx.push_back(RxSource{core_->ports[0].id, static_cast<std::uint16_t>(q), -1,
                               shared.exact_steering ? nullptr : &core_->rx_readers[q]});
    if (!shared.exact_steering)
      for (std::uint32_t q = 0; q < shared.rx_queues; ++q)
        if (q % ctx.channels != c)
          cs.rx.push_back(RxSource{core_->ports[0].id, static_cast<std::uint16_t>(q), -1, &core_->rx_readers[q]});
    cs.targets.push_back(TxTarget{core_->ports[0].id, static_cast<std::uint16_t>(c), -1,
                                  static_cast<std::uint32_t>(ctx.peers.size()) * (cs.window + 16)});
  }
  for (std::size_t i = 0; i < ctx.peers.size(); ++i) {
    const std::uint32_t peer = ctx.peers[i];
    const Identity& them = peers[i];
    const bool lower = ctx.self < peer;
    PeerSetup ps;
    ps.index = peer;
    ps.mac = them.mac;
    ps.ip = them.ip;
    ps.udp_port = static_cast<std::uint16_t>(them.udp + c);
    // One id per pair of driver incarnations: frames of another job, or of an earlier
    // communicator of this one, never pass.
    ps.job_id = fnv1a64(o.job_token + "\n" + ctx.job_id + "\n" + hex64(lower ? me.nonce : them.nonce) + "\n" +
                        hex64(lower ? them.nonce : me.nonce) + "\njob");
    ps.target = core_->memif ? static_cast<std::uint32_t>(i) : 0;
    ps.copy_user_memory = static_cast<std::int32_t>(i) == core_->memif_zero_copy_link;
    ps.label = process_name(ctx, peer) + " (mac " + mac_text(them.mac) + ", " + ip_text(them.ip) + ":" +
               std::to_string(ps.udp_port) + ")";
    cs.peers.push_back(std::move(ps));
  }
  return cs;
}

}  // namespace

bool inject_for_test(Driver& driver, std::uint32_t channel, const void* frame, std::size_t len) {
  if (driver.name() != "dpdk") return false;
  return static_cast<DpdkDriver&>(driver).dpdk_channel(channel).inject_for_test(frame, len);
}

bool frame_header_for_test(Driver& driver, std::uint32_t channel, std::uint32_t peer, FrameHeader* out) {
  if (driver.name() != "dpdk") return false;
  return static_cast<DpdkDriver&>(driver).dpdk_channel(channel).frame_header_for_test(peer, out);
}

std::string mode_for_test(Driver& driver) {
  if (driver.name() != "dpdk") return "";
  return static_cast<DpdkDriver&>(driver).mode();
}

}  // namespace dpdk

namespace {

bool dpdk_driver_usable(std::string* reason) {
  const char* args = std::getenv("SPARCOLL_DPDK_EAL_ARGS");
  const dpdk::EalState& eal = dpdk::start_eal(args != nullptr ? args : "");
  if (eal.status.ok()) return true;
  if (reason != nullptr) *reason = eal.status.message();
  return false;
}

}  // namespace

extern const DriverDescriptor dpdk_driver_descriptor{"dpdk", 20, &create_and_set_up<dpdk::DpdkDriver>, &dpdk_driver_usable,
                                                {/*zero_copy=*/true, /*events=*/false, /*reads_peer_memory=*/false, /*recovers_loss=*/true, /*chosen_by_auto=*/false}};

}  // namespace sparcoll::transport
