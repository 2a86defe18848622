#include "dpdk_channel.hpp"

#include <algorithm>
#include <cstring>

#include "common/log.hpp"
#include "dpdk_eal.hpp"
#include "dpdk_reliability.hpp"
#include "transport/setup_util.hpp"

namespace sparcoll::transport::dpdk {
namespace {

constexpr std::uint32_t kAckEvery = 16;        // arrivals before a standalone ack
constexpr std::uint32_t kMaxBackoff = 8;
constexpr std::uint32_t kMaxControlQueued = 2;  // control frames per peer waiting in a backlog
constexpr int kRxRounds = 4;                    // bursts per source per poll

// A retained frame may be a chain: rte_pktmbuf_free drops one reference of every segment, so a
// reference to the frame is one on every segment.
void ref_chain(rte_mbuf* m, std::int16_t delta) {
  for (; m != nullptr; m = m->next) rte_mbuf_refcnt_update(m, delta);
}

std::uint16_t load_le16(const std::uint8_t* p) {
  std::uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

struct DpdkChannel::Peer {
  std::uint32_t index = 0;
  std::string label;
  FrameHeader tmpl;  // headers of frames we send it; type, seq and ack fields filled per frame
  std::uint32_t target = 0;
  bool copy_user_memory = false;  // PeerSetup::copy_user_memory

  // Send side.
  struct Slot {
    rte_mbuf* m = nullptr;     // the retained frame, until acknowledged
    std::uint64_t seq = 0;
    std::uint64_t sent = 0;    // TSC of the last transmission
    std::uint64_t xmit = 0;    // transmission number of the last transmission (per peer)
    // What its acknowledgement proves about the order of arrival (RACK): the transmission
    // number of the copy that must have arrived. A copy resent because later ones arrived
    // (the earlier copy is known lost) moves it; a copy resent at a timeout does not: the
    // timeout may be spurious (a descheduled receiver) and the first copy the one that arrives,
    // and crediting the resent copy would then declare every frame sent in between lost.
    std::uint64_t rack_mark = 0;
    std::uint32_t tx_count = 0;
    bool sacked = false;
    bool queued = false;       // a reference sits in a backlog
  };
  std::vector<Slot> tx;
  std::uint64_t base = 0;      // lowest seq not acknowledged
  std::uint64_t next_seq = 0;
  // The peer has room for seqs below it. Until its first ack tells, assume the smallest window
  // any peer has (a peer with more peers than we have has a smaller one).
  std::uint64_t limit = kMinWindow;
  RttEstimate rtt;
  std::uint32_t backoff = 0;
  std::uint64_t timer = 0;          // TSC at which the retransmission timer fires
  std::uint64_t last_progress = 0;  // TSC of the last acknowledgement that told us something new
  std::uint64_t retransmits = 0;
  std::uint64_t transmissions = 0;  // data transmissions to this peer so far
  std::uint64_t rack_xmit = 0;      // transmission number of the newest frame known to have arrived

  // Receive side.
  struct RxSlot {
    rte_mbuf* m = nullptr;
    std::uint32_t len = 0;
  };
  std::vector<RxSlot> rx;
  std::uint64_t delivered = 0;  // next seq to hand to the engine
  std::uint64_t arrived = 0;    // every seq below it arrived
  std::uint32_t out_of_order = 0;
  bool ack_dirty = false;
  bool ack_now = false;
  std::uint32_t unacked = 0;
  std::uint64_t dirty_since = 0;
  std::uint64_t limit_sent = kMinWindow;  // the limit we advertised last (the peer assumes kMinWindow at first)
  std::uint32_t control_queued = 0;

  // Closing.
  enum class State : std::uint8_t { open, fin_sent, responding, responded, done };
  State state = State::open;
  std::uint64_t fin_sent_at = 0;  // 0: FIN still to be queued
  bool fin_received = false;
  std::uint64_t fin_seq = 0;
  std::uint64_t fin_time = 0;
  bool link_down = false;
  std::uint64_t link_down_at = 0;  // TSC when we saw it
  bool port_closed = false;
  std::string gone;  // why the peer is gone: the error once its last messages are delivered
};

struct DpdkChannel::Backlog {
  std::uint16_t port = 0;
  std::uint16_t queue = 0;
  std::int32_t peer_pos = -1;
  std::vector<TxEntry> entries;
  std::size_t head = 0;
  std::size_t count = 0;
  bool dead = false;  // the link behind it is closed or promised untouched
};

DpdkChannel::DpdkChannel(ChannelSetup setup)
    : setup_(std::move(setup)),
      index_(setup_.index),
      max_message_(setup_.max_message),
      window_(setup_.window),
      mask_(setup_.window - 1),
      pool_(setup_.pool),
      ring_(setup_.rings[setup_.index]),
      pos_of_(setup_.processes, -1),
      release_(kMaxDeliver, nullptr) {
  expect_.mac = setup_.mac;
  expect_.ip = setup_.ip;
  expect_.udp_port = setup_.udp_port;
  expect_.channel = static_cast<std::uint16_t>(index_);
  expect_.self = setup_.self;
  expect_.max_payload = max_message_;
  hz_ = rte_get_tsc_hz();
  rto_min_ = hz_ / 500;         // 2 ms
  rto_max_ = hz_ / 5;           // 200 ms
  rto_initial_ = hz_ / 200;     // 5 ms
  ack_delay_ = hz_ / 10000;     // 100 us
  fin_interval_ = hz_ / 100;    // 10 ms
  link_settle_ = hz_ / 20;      // 50 ms
  liveness_ = hz_ / 1000 * setup_.liveness_ms;
  now_ = rte_rdtsc();
  rng_ = now_ | 1;
  for (const TxTarget& t : setup_.targets) {
    auto b = std::make_unique<Backlog>();
    b->port = t.port;
    b->queue = t.queue;
    b->peer_pos = t.peer_pos;
    b->entries.resize(t.capacity);
    backlogs_.push_back(std::move(b));
  }
  for (std::size_t i = 0; i < setup_.peers.size(); ++i) {
    const PeerSetup& ps = setup_.peers[i];
    auto p = std::make_unique<Peer>();
    p->index = ps.index;
    p->label = ps.label;
    p->target = ps.target;
    p->copy_user_memory = ps.copy_user_memory;
    p->tx.resize(window_);
    p->rx.resize(window_);
    FrameHeader& h = p->tmpl;
    h.dst_mac = ps.mac;
    h.src_mac = setup_.mac;
    h.src_ip = setup_.ip;
    h.dst_ip = ps.ip;
    h.src_port = setup_.udp_port;
    h.dst_port = ps.udp_port;
    h.channel = static_cast<std::uint16_t>(index_);
    h.job_id = ps.job_id;
    h.src = setup_.self;
    h.dst = ps.index;
    pos_of_[ps.index] = static_cast<std::int32_t>(i);
    peers_.push_back(std::move(p));
  }
}

DpdkChannel::~DpdkChannel() {
  release_delivered();
  for (auto& b : backlogs_) discard(*b);
  for (auto& p : peers_) {
    for (auto& slot : p->tx)
      if (slot.m != nullptr) rte_pktmbuf_free(slot.m);
    for (auto& slot : p->rx)
      if (slot.m != nullptr) rte_pktmbuf_free(slot.m);
  }
  void* objs[kBurst];
  unsigned n;
  while ((n = rte_ring_sc_dequeue_burst(ring_, objs, kBurst, nullptr)) > 0)
    for (unsigned i = 0; i < n; ++i) rte_pktmbuf_free(static_cast<rte_mbuf*>(objs[i]));
}

void DpdkChannel::fail(ErrorCode code, std::string message) {
  if (error_.ok()) error_ = Status(code, std::move(message) + " (seen on dpdk channel " + std::to_string(index_) + ")");
}

bool DpdkChannel::touchable(const Peer& p) const {
  if (p.port_closed || p.link_down) return false;
  return p.state == Peer::State::open || p.state == Peer::State::fin_sent || p.state == Peer::State::responding;
}

// ---------------------------------------------------------------------------------------------
// Send path

void DpdkChannel::fill_ack(Peer& p, FrameHeader* h) {
  h->ack = p.arrived;
  h->sack = p.out_of_order == 0 ? 0
                                : sack_bits(p.arrived, p.delivered + window_,
                                            [&](std::uint64_t seq) { return p.rx[seq & mask_].m != nullptr; });
  h->limit = p.delivered + window_;
  p.limit_sent = h->limit;
  p.ack_dirty = false;
  p.ack_now = false;
  p.unacked = 0;
}

rte_mbuf* DpdkChannel::build(Peer& p, FrameType type, std::uint64_t seq, const struct iovec* iov, int iovcnt,
                             std::uint32_t len) {
  rte_mbuf* m = rte_pktmbuf_alloc(pool_);
  if (m == nullptr) return nullptr;
  auto* frame = reinterpret_cast<std::uint8_t*>(rte_pktmbuf_append(m, static_cast<std::uint16_t>(kHeadersLen + len)));
  if (frame == nullptr) {
    rte_pktmbuf_free(m);
    return nullptr;
  }
  FrameHeader h = p.tmpl;
  h.type = type;
  h.seq = seq;
  h.payload_len = len;
  fill_ack(p, &h);
  write_headers(frame, h, !setup_.ip_checksum_offload);
  if (setup_.ip_checksum_offload) {
    m->l2_len = kEthLen;
    m->l3_len = kIpLen;
    m->ol_flags |= RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM;
    if (setup_.udp_checksum_offload) {
      m->ol_flags |= RTE_MBUF_F_TX_UDP_CKSUM;
      const std::uint16_t pseudo = udp_pseudo_header_sum(frame);
      frame[kUdpOffset + 6] = static_cast<std::uint8_t>(pseudo >> 8);
      frame[kUdpOffset + 7] = static_cast<std::uint8_t>(pseudo);
    }
  }
  std::uint8_t* to = frame + kHeadersLen;
  for (int i = 0; i < iovcnt; ++i) {
    if (iov[i].iov_len == 0) continue;
    std::memcpy(to, iov[i].iov_base, iov[i].iov_len);
    to += iov[i].iov_len;
  }
  return m;
}

void DpdkChannel::on_user_buffer_free(void* addr, void* opaque) {
  (void)addr;
  static_cast<std::atomic<std::uint64_t>*>(opaque)->fetch_sub(1, std::memory_order_release);
}

namespace {

// The registered user memory a send may point mbufs at; a part qualifies when it lies inside and
// is big enough for attaching to pay off.
struct UserRange {
  std::uintptr_t begin = 0, end = 0;
  bool holds(const struct iovec& v) const {
    const auto addr = reinterpret_cast<std::uintptr_t>(v.iov_base);
    return v.iov_len >= kZeroCopyMin && addr >= begin && v.iov_len <= end - addr && addr < end;
  }
};

// The segments a chain for `iov` takes: the header's, one per run of adjacent in-place parts,
// and one per copied part that follows an in-place one. *any: some part is in place.
std::uint16_t count_segments(const struct iovec* iov, int iovcnt, const UserRange& user, bool* any) {
  std::uint16_t segments = 1;
  *any = false;
  bool last_ext = false;
  std::uintptr_t ext_end = 0;
  for (int i = 0; i < iovcnt; ++i) {
    if (iov[i].iov_len == 0) continue;
    const auto addr = reinterpret_cast<std::uintptr_t>(iov[i].iov_base);
    if (user.holds(iov[i])) {
      *any = true;
      if (!(last_ext && ext_end == addr)) ++segments;
      last_ext = true;
      ext_end = addr + iov[i].iov_len;
    } else {
      if (last_ext) ++segments;
      last_ext = false;
    }
  }
  return segments;
}

}  // namespace

// An mbuf of the attachable pool pointing at n bytes of user memory at `from`, or null when
// every one is retained.
rte_mbuf* DpdkChannel::attach_user_bytes(std::uint8_t* from, std::size_t n, std::uintptr_t user_end) {
  rte_mbuf* e = rte_pktmbuf_alloc(setup_.ext_pool);
  if (e == nullptr) return nullptr;
  // The shared info lives in e's own data room, unused while e is attached elsewhere and
  // valid until e itself returns to the pool (after the callback ran).
  auto* shinfo = static_cast<rte_mbuf_ext_shared_info*>(e->buf_addr);
  shinfo->free_cb = &DpdkChannel::on_user_buffer_free;
  shinfo->fcb_opaque = &user_buffers_live_;
  rte_mbuf_ext_refcnt_set(shinfo, 1);
  const std::size_t room = std::min<std::size_t>(user_end - reinterpret_cast<std::uintptr_t>(from), 0xffff);
  rte_pktmbuf_attach_extbuf(e, from, static_cast<rte_iova_t>(reinterpret_cast<std::uintptr_t>(from)),
                            static_cast<std::uint16_t>(room), shinfo);
  user_buffers_live_.fetch_add(1, std::memory_order_relaxed);
  e->data_len = static_cast<std::uint16_t>(n);
  return e;
}

rte_mbuf* DpdkChannel::build_chain(Peer& p, std::uint64_t seq, const struct iovec* iov, int iovcnt, std::uint32_t len,
                                   const UserMemory& user_memory, bool* copy_instead) {
  *copy_instead = false;
  const auto user_begin = reinterpret_cast<std::uintptr_t>(user_memory.base);
  const UserRange user{user_begin, user_begin + user_memory.len};
  bool any = false;
  if (count_segments(iov, iovcnt, user, &any) > setup_.max_segments || !any) {
    *copy_instead = true;
    return nullptr;
  }
  rte_mbuf* head = build(p, FrameType::data, seq, nullptr, 0, len);
  if (head == nullptr) return nullptr;
  // build() took the pending ack into this frame; a frame that is not sent must not lose it.
  auto give_up = [&]() -> rte_mbuf* {
    rte_pktmbuf_free(head);
    p.ack_dirty = true;
    p.ack_now = true;
    return nullptr;
  };
  // build() appended room for the whole payload; the chain puts it in segments instead.
  head->data_len = static_cast<std::uint16_t>(kHeadersLen);
  head->pkt_len = kHeadersLen;
  rte_mbuf* tail = head;
  bool last_ext = false;
  for (int i = 0; i < iovcnt; ++i) {
    const std::size_t n = iov[i].iov_len;
    if (n == 0) continue;
    if (user.holds(iov[i])) {
      auto* from = static_cast<std::uint8_t*>(iov[i].iov_base);
      const bool extends_tail = last_ext && rte_pktmbuf_mtod_offset(tail, std::uint8_t*, tail->data_len) == from &&
                                tail->data_len + n <= tail->buf_len;
      if (extends_tail) {
        tail->data_len = static_cast<std::uint16_t>(tail->data_len + n);
      } else {
        rte_mbuf* e = attach_user_bytes(from, n, user.end);
        if (e == nullptr) {  // every attachable mbuf is retained: this frame copies
          *copy_instead = true;
          return give_up();
        }
        tail->next = e;
        tail = e;
        ++head->nb_segs;
      }
      head->pkt_len += static_cast<std::uint32_t>(n);
      last_ext = true;
      continue;
    }
    if (last_ext) {  // a copied part after an in-place one opens a new segment
      rte_mbuf* c = rte_pktmbuf_alloc(pool_);
      if (c == nullptr) return give_up();
      tail->next = c;
      tail = c;
      ++head->nb_segs;
      last_ext = false;
    }
    if (rte_pktmbuf_tailroom(tail) < n) {  // cannot happen: a frame fits one mbuf
      *copy_instead = true;
      return give_up();
    }
    std::memcpy(rte_pktmbuf_mtod_offset(tail, std::uint8_t*, tail->data_len), iov[i].iov_base, n);
    tail->data_len = static_cast<std::uint16_t>(tail->data_len + n);
    head->pkt_len += static_cast<std::uint32_t>(n);
  }
  if (!zero_copy_logged_) {  // once per channel: shows zero-copy is on without logging per message
    zero_copy_logged_ = true;
    SC_LOG_INFO("dpdk channel %u: zero-copy sends from registered user memory to %s (%u segments)", index_,
                p.label.c_str(), head->nb_segs);
  }
  return head;
}

ChannelCounters DpdkChannel::counters() const {
  ChannelCounters out;
  out.add("packets_sent", counters_.packets_sent);
  out.add("packets_received", counters_.packets_received);
  out.add("retransmitted", counters_.retransmitted);
  out.add("dropped_invalid", counters_.dropped_invalid);
  out.add("duplicates", counters_.duplicates);
  out.add("dropped_by_hook", counters_.dropped_by_hook);
  return out;
}

bool DpdkChannel::user_memory_released() {
  if (user_buffers_live_.load(std::memory_order_acquire) == 0) return true;
  if (!error_.ok()) return false;
  // Progress like flushed(): the caller may still hold the last poll's messages.
  now_ = rte_rdtsc();
  receive();
  housekeeping();
  flush_all();
  return user_buffers_live_.load(std::memory_order_acquire) == 0;
}

bool DpdkChannel::push(Backlog& b, const TxEntry& entry) {
  if (b.dead || b.count == b.entries.size()) return false;
  // No modulo: the capacity is not a power of two, and a 64-bit division per frame was the
  // hottest instruction of the send path in a profile (perf/transport_bw --lockstep).
  std::size_t at = b.head + b.count;
  if (at >= b.entries.size()) at -= b.entries.size();
  b.entries[at] = entry;
  ++b.count;
  return true;
}

void DpdkChannel::transmit_data(Peer& p, std::uint64_t seq, bool at_timeout) {
  Peer::Slot& slot = p.tx[seq & mask_];
  slot.sent = now_;
  slot.xmit = ++p.transmissions;
  if (!at_timeout) slot.rack_mark = slot.xmit;
  if (++slot.tx_count > 1) {
    ++counters_.retransmitted;
    ++p.retransmits;
  }
  // The deterministic loss hook: every Nth data transmission of this channel is "lost".
  if (setup_.drop_every != 0 && ++data_transmissions_ % setup_.drop_every == 0) {
    ++counters_.dropped_by_hook;
    return;
  }
  ref_chain(slot.m, 1);  // the device frees this reference once it sent the frame
  const auto pos = static_cast<std::uint32_t>(pos_of_[p.index]);
  if (!push(*backlogs_[p.target], TxEntry{slot.m, seq, pos, FrameType::data})) {
    ref_chain(slot.m, -1);
    return;  // the retransmission timer tries again
  }
  slot.queued = true;
}

SendResult DpdkChannel::send(std::uint32_t peer_index, const struct iovec* iov, int iovcnt) {
  return send_message(peer_index, iov, iovcnt, nullptr);
}

SendResult DpdkChannel::send(std::uint32_t peer_index, const struct iovec* iov, int iovcnt, const UserMemory& user) {
  return send_message(peer_index, iov, iovcnt, setup_.zero_copy && user.len != 0 ? &user : nullptr);
}

SendResult DpdkChannel::send_message(std::uint32_t peer_index, const struct iovec* iov, int iovcnt,
                                     const UserMemory* user) {
  if (!error_.ok()) return SendResult::error;
  adopt_lcore();
  if (peer_index >= pos_of_.size() || pos_of_[peer_index] < 0) {
    fail(ErrorCode::invalid_argument, "send to process " + std::to_string(peer_index) + ", which is not a peer");
    return SendResult::error;
  }
  Peer& p = *peers_[static_cast<std::size_t>(pos_of_[peer_index])];
  std::uint64_t len = 0;
  for (int i = 0; i < iovcnt; ++i) len += iov[i].iov_len;
  if (len > max_message_) {
    error_ = Status(ErrorCode::invalid_argument, "message of " + std::to_string(len) + " bytes to " + p.label +
                                                     " exceeds the max message of " + std::to_string(max_message_) +
                                                     " bytes on dpdk channel " + std::to_string(index_) +
                                                     setup_.limit_note);
    return SendResult::error;
  }
  if (!p.gone.empty() || p.state != Peer::State::open) {
    fail(ErrorCode::peer_failure, p.label + " " + (p.gone.empty() ? "closed its dpdk transport" : p.gone));
    return SendResult::error;
  }
  if (p.next_seq - p.base >= window_ || p.next_seq >= p.limit) return SendResult::no_resource;
  Backlog& b = *backlogs_[p.target];
  if (b.count == b.entries.size()) {
    flush(b);
    if (b.count == b.entries.size()) return SendResult::no_resource;
  }
  rte_mbuf* m = nullptr;
  bool copy = user == nullptr || p.copy_user_memory;
  if (!copy) m = build_chain(p, p.next_seq, iov, iovcnt, static_cast<std::uint32_t>(len), *user, &copy);
  if (copy) m = build(p, FrameType::data, p.next_seq, iov, iovcnt, static_cast<std::uint32_t>(len));
  if (m == nullptr) return SendResult::no_resource;
  // The clock once per burst: frames queued together leave together (at the latest when the
  // backlog reaches a burst or at the next poll), so they share a transmission time.
  if (b.count == 0) now_ = rte_rdtsc();
  const std::uint64_t seq = p.next_seq++;
  Peer::Slot& slot = p.tx[seq & mask_];
  slot = Peer::Slot{};
  slot.m = m;
  slot.seq = seq;
  if (seq == p.base) {
    // The first message in flight: the timers start now.
    p.last_progress = now_;
    arm_timer(p);
  }
  transmit_data(p, seq, false);
  if (b.count >= kBurst) flush(b);
  return SendResult::ok;
}

bool DpdkChannel::queue_control(Peer& p, FrameType type) {
  if (p.control_queued >= kMaxControlQueued) return false;
  Backlog& b = *backlogs_[p.target];
  if (b.dead || b.count == b.entries.size()) return false;
  rte_mbuf* m = build(p, type, type == FrameType::fin ? p.next_seq : 0, nullptr, 0, 0);
  if (m == nullptr) return false;
  const auto pos = static_cast<std::uint32_t>(pos_of_[p.index]);
  if (!push(b, TxEntry{m, 0, pos, type})) {
    rte_pktmbuf_free(m);
    return false;
  }
  ++p.control_queued;
  if (type == FrameType::fin) p.fin_sent_at = now_;
  return true;
}

void DpdkChannel::respond(Peer& p) {
  if (queue_control(p, FrameType::fin_ack)) p.state = Peer::State::responding;
}

void DpdkChannel::on_sent(const TxEntry& entry) {
  ++counters_.packets_sent;
  Peer& p = *peers_[entry.peer];
  if (entry.type == FrameType::data) {
    Peer::Slot& slot = p.tx[entry.seq & mask_];
    if (slot.seq == entry.seq) slot.queued = false;
    return;
  }
  --p.control_queued;
  if (entry.type == FrameType::fin_ack && p.state == Peer::State::responding) {
    // Our promise is on its way: from here on this peer's memif link is never touched again.
    p.state = Peer::State::responded;
  }
}

void DpdkChannel::discard(Backlog& b) {
  while (b.count > 0) {
    const TxEntry& e = b.entries[b.head];
    Peer& p = *peers_[e.peer];
    if (e.type == FrameType::data) {
      Peer::Slot& slot = p.tx[e.seq & mask_];
      if (slot.seq == e.seq) slot.queued = false;
    } else {
      --p.control_queued;
    }
    rte_pktmbuf_free(e.m);
    if (++b.head == b.entries.size()) b.head = 0;
    --b.count;
  }
}

void DpdkChannel::flush(Backlog& b) {
  while (b.count > 0) {
    if (b.dead) {
      discard(b);
      return;
    }
    const std::size_t cap = b.entries.size();
    const auto k = static_cast<std::uint16_t>(std::min<std::size_t>({b.count, kBurst, cap - b.head}));
    rte_mbuf* burst[kBurst];
    for (std::uint16_t i = 0; i < k; ++i) burst[i] = b.entries[b.head + i].m;
    const std::uint16_t sent = rte_eth_tx_burst(b.port, b.queue, burst, k);
    for (std::uint16_t i = 0; i < sent; ++i) {
      const TxEntry entry = b.entries[b.head];
      if (++b.head == cap) b.head = 0;
      --b.count;
      on_sent(entry);
      // A FIN_ACK went out on a memif link: nothing may follow it there.
      if (entry.type == FrameType::fin_ack && b.peer_pos >= 0 && setup_.memif) b.dead = true;
    }
    if (sent < k) return;  // the device is full; the rest waits for the next poll
  }
}

void DpdkChannel::flush_all() {
  for (auto& b : backlogs_)
    if (b->count > 0) flush(*b);
}

// ---------------------------------------------------------------------------------------------
// Receive path

bool DpdkChannel::memif_link_up(Peer& p, std::uint16_t port) {
  rte_eth_link link {};
  if (rte_eth_link_get_nowait(port, &link) == 0 && link.link_status == RTE_ETH_LINK_UP) return true;
  on_link_down(p);
  return false;
}

void DpdkChannel::on_link_down(Peer& p) {
  if (p.link_down) return;
  p.link_down = true;
  p.link_down_at = now_;
  if (p.gone.empty()) p.gone = "is gone: its memif link went down (the process exited or closed its port)";
  // Whatever was queued for it will never leave.
  Backlog& b = *backlogs_[p.target];
  if (b.peer_pos >= 0) {
    b.dead = true;
    discard(b);
  }
}

void DpdkChannel::receive(std::uint32_t budget) {
  rte_mbuf* mbufs[kBurst];
  const std::size_t sources = setup_.rx.size();
  for (std::size_t k = 0; k < sources && budget > 0; ++k) {
    std::size_t at = next_source_ + k;
    if (at >= sources) at -= sources;
    const RxSource& src = setup_.rx[at];
    if (src.peer_pos >= 0) {
      // Never read a link after our FIN_ACK left (responded) or once it is down or closed.
      Peer& p = *peers_[static_cast<std::size_t>(src.peer_pos)];
      if (!touchable(p) || !memif_link_up(p, src.port)) continue;
    } else if (shared_port_closed_) {
      continue;
    }
    if (src.reader != nullptr && src.reader->exchange(true, std::memory_order_acquire)) continue;
    for (int round = 0; round < kRxRounds && budget > 0; ++round) {
      const auto want = static_cast<std::uint16_t>(std::min<std::uint32_t>(budget, kBurst));
      const std::uint16_t n = rte_eth_rx_burst(src.port, src.queue, mbufs, want);
      budget -= n;
      for (std::uint16_t i = 0; i < n; ++i) steer(mbufs[i]);
      if (n < want) break;
    }
    if (src.reader != nullptr) src.reader->store(false, std::memory_order_release);
  }
  if (sources > 0 && ++next_source_ >= sources) next_source_ = 0;
  void* objs[kBurst];
  for (int round = 0; round < kRxRounds; ++round) {
    const unsigned n = rte_ring_sc_dequeue_burst(ring_, objs, kBurst, nullptr);
    for (unsigned i = 0; i < n; ++i) process(static_cast<rte_mbuf*>(objs[i]));
    if (n < kBurst) break;
  }
}

void DpdkChannel::steer(rte_mbuf* m) {
  // Only the channel field is read here; process() validates everything, in the right channel.
  if (m->nb_segs == 1 && m->data_len >= kHeadersLen) {
    const std::uint16_t channel = load_le16(rte_pktmbuf_mtod(m, const std::uint8_t*) + field::channel);
    if (channel != index_ && channel < setup_.channels) {
      if (rte_ring_mp_enqueue(setup_.rings[channel], m) != 0) rte_pktmbuf_free(m);  // full: as if lost
      return;
    }
  }
  process(m);
}

bool DpdkChannel::inject_for_test(const void* frame, std::size_t len) {
  rte_mbuf* m = rte_pktmbuf_alloc(pool_);
  if (m == nullptr) return false;
  void* to = len > 0xffff ? nullptr : rte_pktmbuf_append(m, static_cast<std::uint16_t>(len));
  if (to == nullptr) {
    rte_pktmbuf_free(m);
    return false;
  }
  std::memcpy(to, frame, len);
  std::uint32_t channel = index_;
  if (len >= kHeadersLen) {
    const std::uint16_t named = load_le16(static_cast<const std::uint8_t*>(frame) + field::channel);
    if (named < setup_.channels) channel = named;
  }
  if (rte_ring_mp_enqueue(setup_.rings[channel], m) != 0) {
    rte_pktmbuf_free(m);
    return false;
  }
  return true;
}

bool DpdkChannel::frame_header_for_test(std::uint32_t peer, FrameHeader* out) const {
  if (peer >= pos_of_.size() || pos_of_[peer] < 0) return false;
  const Peer& p = *peers_[static_cast<std::size_t>(pos_of_[peer])];
  FrameHeader h = p.tmpl;
  std::swap(h.src_mac, h.dst_mac);
  std::swap(h.src_ip, h.dst_ip);
  std::swap(h.src_port, h.dst_port);
  std::swap(h.src, h.dst);
  h.type = FrameType::data;
  h.seq = 0;
  h.ack = p.base;
  h.sack = 0;
  h.limit = p.limit;
  h.payload_len = 0;
  *out = h;
  return true;
}

void DpdkChannel::process(rte_mbuf* m) {
  ++counters_.packets_received;
  Verdict verdict = Verdict::ok;
  FrameHeader h;
  Peer* peer = nullptr;
  if (m->nb_segs != 1 || m->pkt_len != m->data_len) {
    verdict = Verdict::segmented;
  } else {
    const std::uint64_t flags = m->ol_flags;
    const bool ip_good = setup_.rx_checksum_offload && (flags & RTE_MBUF_F_RX_IP_CKSUM_MASK) == RTE_MBUF_F_RX_IP_CKSUM_GOOD;
    const bool udp_good = setup_.rx_checksum_offload && (flags & RTE_MBUF_F_RX_L4_CKSUM_MASK) == RTE_MBUF_F_RX_L4_CKSUM_GOOD;
    if (setup_.rx_checksum_offload && (flags & RTE_MBUF_F_RX_IP_CKSUM_MASK) == RTE_MBUF_F_RX_IP_CKSUM_BAD) {
      verdict = Verdict::bad_ip_checksum;
    } else if (setup_.rx_checksum_offload && (flags & RTE_MBUF_F_RX_L4_CKSUM_MASK) == RTE_MBUF_F_RX_L4_CKSUM_BAD) {
      verdict = Verdict::bad_udp_checksum;
    } else {
      verdict = parse_frame(rte_pktmbuf_mtod(m, const std::uint8_t*), m->data_len, expect_, ip_good, udp_good, &h);
    }
  }
  if (verdict == Verdict::ok) {
    if (h.src >= pos_of_.size() || pos_of_[h.src] < 0) {
      verdict = Verdict::unknown_src;
    } else {
      peer = peers_[static_cast<std::size_t>(pos_of_[h.src])].get();
      if (h.job_id != peer->tmpl.job_id) {
        verdict = Verdict::wrong_job;
      } else if (!(h.src_mac == peer->tmpl.dst_mac) || h.src_ip != peer->tmpl.dst_ip || h.src_port != peer->tmpl.dst_port) {
        verdict = Verdict::wrong_source_address;
      } else if (h.ack > peer->next_seq ||
                 (h.sack != 0 && h.ack + 1 + (63 - static_cast<std::uint64_t>(__builtin_clzll(h.sack))) >= peer->next_seq)) {
        verdict = Verdict::bad_ack;  // acknowledges something never sent
      } else if (h.type == FrameType::data && h.seq >= peer->delivered + window_) {
        verdict = Verdict::out_of_window;
      } else if (h.type == FrameType::fin && (h.seq < peer->arrived || h.seq > peer->delivered + window_)) {
        verdict = Verdict::out_of_window;
      }
    }
  }
  if (verdict != Verdict::ok) {
    ++counters_.dropped_invalid;
    rte_pktmbuf_free(m);
    return;
  }
  Peer& p = *peer;
  if (p.state == Peer::State::done || p.state == Peer::State::responded) {
    // It already knows we are through; a repeated FIN (lost FIN_ACK, port mode) gets another.
    if (h.type == FrameType::fin && p.state == Peer::State::responded && !setup_.memif && !p.port_closed)
      queue_control(p, FrameType::fin_ack);
    rte_pktmbuf_free(m);
    return;
  }
  on_ack_fields(p, h);
  bool kept = false;
  switch (h.type) {
    case FrameType::data:
      kept = on_data(p, h, m);
      break;
    case FrameType::fin:
      on_fin(p, h);
      break;
    case FrameType::fin_ack:
      if (p.state == Peer::State::fin_sent) p.state = Peer::State::done;
      break;
    case FrameType::ack:
      break;
  }
  if (!kept) rte_pktmbuf_free(m);
}

void DpdkChannel::arm_timer(Peer& p) {
  const std::uint64_t wait = rto(p);
  p.timer = now_ + jittered(wait, &rng_);
}

std::uint64_t DpdkChannel::rto(const Peer& p) const {
  return p.rtt.timeout(rto_initial_, rto_min_, rto_max_, p.backoff);
}

void DpdkChannel::on_ack_fields(Peer& p, const FrameHeader& h) {
  bool progress = false;
  if (h.limit > p.limit) p.limit = h.limit;
  // RACK-style loss detection needs the newest transmission known to have arrived (see
  // Slot::rack_mark for frames resent at a timeout).
  auto arrived = [&](const Peer::Slot& slot) { p.rack_xmit = std::max(p.rack_xmit, slot.rack_mark); };
  if (h.ack > p.base) {
    const Peer::Slot& newest = p.tx[(h.ack - 1) & mask_];
    if (newest.tx_count == 1 && newest.m != nullptr) p.rtt.sample(now_ - newest.sent);  // Karn: never a resent frame
    for (std::uint64_t seq = p.base; seq < h.ack; ++seq) {
      Peer::Slot& slot = p.tx[seq & mask_];
      if (!slot.sacked) arrived(slot);
      if (slot.m != nullptr) rte_pktmbuf_free(slot.m);
      slot.m = nullptr;
    }
    p.base = h.ack;
    progress = true;
  }
  const std::uint64_t highest = for_each_sacked(h.ack, h.sack, [&](std::uint64_t seq) {
    if (seq < p.base || seq >= p.next_seq) return;
    Peer::Slot& slot = p.tx[seq & mask_];
    if (slot.sacked) return;
    slot.sacked = true;
    arrived(slot);
    // It sits in the peer's reorder buffer, which never drops it: no retransmission needed.
    if (slot.m != nullptr) rte_pktmbuf_free(slot.m);
    slot.m = nullptr;
    progress = true;
  });
  if (progress) {
    p.last_progress = now_;
    p.backoff = 0;
    arm_timer(p);
  }
  if (!progress || (p.state != Peer::State::open && p.state != Peer::State::fin_sent)) return;
  // A frame presumed lost (dpdk_reliability.hpp: three later frames arrived, or a frame
  // transmitted after it did) is resent now, not at the timeout.
  const std::uint64_t horizon = std::min(p.next_seq, p.base + 65);
  for (std::uint64_t seq = p.base; seq < horizon; ++seq) {
    Peer::Slot& slot = p.tx[seq & mask_];
    if (slot.m == nullptr || slot.sacked || slot.queued) continue;
    if (presumed_lost(seq, slot.tx_count, slot.xmit, highest, p.rack_xmit)) transmit_data(p, seq, false);
  }
}

bool DpdkChannel::on_data(Peer& p, const FrameHeader& h, rte_mbuf* m) {
  const std::uint64_t seq = h.seq;
  Peer::RxSlot& slot = p.rx[seq & mask_];
  if (seq < p.delivered || slot.m != nullptr) {
    ++counters_.duplicates;
    p.ack_now = true;  // the sender evidently missed our ack
    return false;
  }
  // The engine gets the payload 8-byte aligned: move a frame that a device placed otherwise.
  auto* frame = rte_pktmbuf_mtod(m, std::uint8_t*);
  const std::size_t misalign = reinterpret_cast<std::uintptr_t>(frame + kHeadersLen) & 7;
  if (misalign != 0) {
    if (m->data_off < misalign) {
      ++counters_.dropped_invalid;
      return false;
    }
    std::memmove(frame - misalign, frame, m->data_len);
    m->data_off = static_cast<std::uint16_t>(m->data_off - misalign);
  }
  slot.m = m;
  slot.len = h.payload_len;
  if (seq == p.arrived) {
    ++p.arrived;
    while (p.arrived < p.delivered + window_ && p.rx[p.arrived & mask_].m != nullptr) {
      ++p.arrived;
      --p.out_of_order;
    }
  } else {
    // A hole below it: tell the sender now, its SACK starts the fast retransmit.
    if (p.out_of_order++ % 4 == 0) p.ack_now = true;
  }
  if (!p.ack_dirty || p.unacked == 0) p.dirty_since = now_;
  p.ack_dirty = true;
  ++p.unacked;
  return true;
}

void DpdkChannel::on_fin(Peer& p, const FrameHeader& h) {
  if (!p.fin_received) {
    p.fin_received = true;
    p.fin_seq = h.seq;
    p.fin_time = now_;
    if (p.gone.empty()) p.gone = "closed its dpdk transport";
  }
  // Answered in housekeeping(): at once when we are closing too, else once its last data is here.
  // In a simultaneous close (we sent FIN as well) the lower index answers, the higher waits.
}

int DpdkChannel::deliver(ReceivedMessage* out, int max) {
  int n = 0;
  const int cap = std::min<int>(max, static_cast<int>(kMaxDeliver - released_count_));
  const std::size_t count = peers_.size();
  for (std::size_t k = 0; k < count && n < cap; ++k) {
    std::size_t pos = next_first_ + k;
    if (pos >= count) pos -= count;
    Peer& p = *peers_[pos];
    const std::uint64_t before = p.delivered;
    while (n < cap && p.delivered < p.arrived) {
      Peer::RxSlot& slot = p.rx[p.delivered & mask_];
      out[n++] = ReceivedMessage{p.index, rte_pktmbuf_mtod_offset(slot.m, const std::byte*, kHeadersLen), slot.len};
      release_[released_count_++] = slot.m;
      slot.m = nullptr;
      ++p.delivered;
    }
    if (p.delivered != before) {
      // Room opened: the sender learns it with the next ack, at once after a quarter window.
      if (!p.ack_dirty) p.dirty_since = now_;
      p.ack_dirty = true;
      if (p.delivered + window_ - p.limit_sent >= window_ / 4) p.ack_now = true;
    }
  }
  if (count > 0 && ++next_first_ >= count) next_first_ = 0;
  return n;
}

void DpdkChannel::release_delivered() {
  for (std::size_t i = 0; i < released_count_; ++i) rte_pktmbuf_free(release_[i]);
  released_count_ = 0;
}

// ---------------------------------------------------------------------------------------------
// Timers, acks, closing, failure

void DpdkChannel::on_timeout(Peer& p) {
  if (!closing_ && now_ - p.last_progress > liveness_) {
    fail(ErrorCode::peer_failure,
         p.label + " acknowledged nothing for " + std::to_string((now_ - p.last_progress) * 1000 / hz_) + " ms with " +
             std::to_string(p.next_seq - p.base) + " messages outstanding (" + std::to_string(p.retransmits) +
             " retransmissions tried)");
    return;
  }
  // Only the frames the peer's SACK can speak about (base .. base + 64): beyond it we cannot
  // tell lost from arrived, and resending a whole window of arrived frames every timeout wastes
  // the link (and, under a periodic loss pattern, can lose the same frames every round).
  const std::uint64_t wait = rto(p);
  const std::uint64_t horizon = std::min(p.next_seq, p.base + 65);
  for (std::uint64_t seq = p.base; seq < horizon; ++seq) {
    Peer::Slot& slot = p.tx[seq & mask_];
    if (slot.m == nullptr || slot.sacked || slot.queued || now_ - slot.sent < wait) continue;
    transmit_data(p, seq, true);
  }
  if (p.backoff < kMaxBackoff) ++p.backoff;
  arm_timer(p);
}

void DpdkChannel::housekeeping() {
  for (auto& pp : peers_) {
    Peer& p = *pp;
    if (setup_.memif && p.state == Peer::State::responded && !p.link_down && !p.port_closed) {
      // We promised not to touch this link; reading its status is not touching it.
      rte_eth_link link {};
      if (rte_eth_link_get_nowait(static_cast<std::uint16_t>(backlogs_[p.target]->port), &link) == 0 &&
          link.link_status != RTE_ETH_LINK_UP)
        on_link_down(p);
    }
    if (!touchable(p) || p.state == Peer::State::responding) continue;
    if (p.base < p.next_seq && now_ >= p.timer) on_timeout(p);
    if (closing_ && p.state == Peer::State::open && !p.fin_received) {
      if (queue_control(p, FrameType::fin)) p.state = Peer::State::fin_sent;
    } else if (p.state == Peer::State::fin_sent && now_ - p.fin_sent_at >= fin_interval_) {
      queue_control(p, FrameType::fin);  // lost (port mode) or still queued behind a full device
    }
    if (p.fin_received) {
      const bool answer = p.state == Peer::State::open ? (closing_ || p.arrived >= p.fin_seq)
                                                       : (p.state == Peer::State::fin_sent && setup_.self < p.index);
      if (answer) {
        respond(p);
        continue;
      }
    }
    if (p.ack_now || (p.ack_dirty && (p.unacked >= kAckEvery || now_ - p.dirty_since >= ack_delay_)))
      queue_control(p, FrameType::ack);
  }
}

void DpdkChannel::check_gone_peers() {
  for (auto& pp : peers_) {
    Peer& p = *pp;
    if (p.gone.empty() || p.delivered < p.arrived) continue;
    // After a FIN, wait for the data it announced unless the peer can no longer send it.
    if (!p.link_down && p.fin_received && p.arrived < p.fin_seq && now_ - p.fin_time < liveness_ &&
        (p.state == Peer::State::open || p.state == Peer::State::fin_sent))
      continue;
    fail(ErrorCode::peer_failure, p.label + " " + p.gone);
    return;
  }
}

int DpdkChannel::poll(ReceivedMessage* out, int max) {
  if (!error_.ok()) return -1;
  adopt_lcore();
  now_ = rte_rdtsc();
  release_delivered();
  // Take from the devices about what this poll can hand out (rounded up to a burst, at least
  // one burst so that acks keep coming when the caller takes nothing): frames left in the
  // device's ring cost nothing, while frames parked in the reorder buffer keep their mbufs out
  // of the pool's cache, and cycling through a window of cold mbufs cost a third of the receive
  // rate (perf/transport_bw). The device's ring is the buffer; backpressure reaches the sender
  // through it, as on a NIC.
  std::uint64_t pending = 0;
  for (const auto& p : peers_) pending += p->arrived - p->delivered;
  const std::uint64_t room = max > 0 && pending < static_cast<std::uint64_t>(max) ? max - pending : 0;
  receive(static_cast<std::uint32_t>(std::max<std::uint64_t>((room + kBurst - 1) / kBurst * kBurst, kBurst)));
  const int n = deliver(out, max);
  housekeeping();
  flush_all();
  if (error_.ok()) check_gone_peers();
  if (!error_.ok()) return n > 0 ? n : -1;  // the error shows at the next poll
  return n;
}

bool DpdkChannel::flushed() {
  if (!error_.ok()) return true;  // nothing more will leave
  adopt_lcore();
  // Progress without handing anything out: the caller may still hold the last poll's messages.
  now_ = rte_rdtsc();
  receive();
  housekeeping();
  flush_all();
  for (auto& p : peers_) {
    if (!touchable(*p)) continue;
    if (p->base < p->next_seq) return false;
  }
  for (auto& b : backlogs_)
    if (b->count > 0 && !b->dead) return false;
  return true;
}

// ---------------------------------------------------------------------------------------------
// Teardown

void DpdkChannel::begin_close() {
  closing_ = true;
  now_ = rte_rdtsc();
  for (auto& pp : peers_) {
    Peer& p = *pp;
    if (p.port_closed || p.link_down) p.state = Peer::State::done;
  }
  housekeeping();  // queues the FINs (and answers FINs already received)
  flush_all();
}

void DpdkChannel::close_step() {
  adopt_lcore();
  now_ = rte_rdtsc();
  release_delivered();
  receive();
  // Nobody consumes any more: whatever arrived counts as delivered, so acks keep the peers going.
  for (auto& pp : peers_) {
    Peer& p = *pp;
    if (p.delivered == p.arrived) continue;
    while (p.delivered < p.arrived) {
      Peer::RxSlot& slot = p.rx[p.delivered & mask_];
      rte_pktmbuf_free(slot.m);
      slot.m = nullptr;
      ++p.delivered;
    }
    p.ack_dirty = true;
  }
  housekeeping();
  flush_all();
}

bool DpdkChannel::peer_finished(std::size_t pos) const {
  const Peer& p = *peers_[pos];
  if (p.port_closed) return true;
  // memif reports the link down first and only then, in the EAL's interrupt thread, unmaps
  // and frees the link's state; closing the port meanwhile races with that (double frees).
  if (p.link_down) return now_ - p.link_down_at >= link_settle_;
  if (p.state == Peer::State::done) return true;
  // A peer we answered closes the link itself; in port mode there is no link to wait for.
  return p.state == Peer::State::responded && !setup_.memif;
}

void DpdkChannel::port_closed(std::int32_t pos) {
  if (pos < 0) {
    shared_port_closed_ = true;
    for (auto& b : backlogs_) {
      b->dead = true;
      discard(*b);
    }
    for (auto& p : peers_) {
      p->port_closed = true;
      p->state = Peer::State::done;
    }
    return;
  }
  Peer& p = *peers_[static_cast<std::size_t>(pos)];
  p.port_closed = true;
  p.state = Peer::State::done;
  Backlog& b = *backlogs_[p.target];
  b.dead = true;
  discard(b);
}

}  // namespace sparcoll::transport::dpdk
