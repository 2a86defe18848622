#include "rdma_channel.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

#include "common/log.hpp"
#include "transport/setup_util.hpp"

namespace sparcoll::transport::rdma {
namespace {

constexpr std::uint64_t kRingTargetBytes = 2u << 20;  // per (peer, channel): enough in flight for 100 Gb/s x 100 us
constexpr std::uint32_t kMaxSlots = 64;
constexpr std::uint32_t kMinSlots = 2;
constexpr std::size_t kCreditLine = 64;               // one credit word per cache line
constexpr std::uint64_t kKeepaliveNs = 200'000'000;
constexpr std::uint32_t kPollsPerClockRead = 16;
constexpr std::uint64_t kRecvTag = std::uint64_t{1} << 63;
constexpr std::uint64_t kLowMask = (std::uint64_t{1} << 48) - 1;
constexpr int kPollBatch = 16;
constexpr std::uint32_t kMaxSendSge = 16;  // header + up to 15 runs of user blocks per write

std::uint64_t coarse_now_ns() {
  struct timespec now {};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &now);  // vDSO: no syscall
  return static_cast<std::uint64_t>(now.tv_sec) * 1'000'000'000ull + static_cast<std::uint64_t>(now.tv_nsec);
}

std::string hex(std::uint32_t v) {
  char buffer[16];
  std::snprintf(buffer, sizeof buffer, "0x%x", v);
  return buffer;
}

void* map_zeroed(std::size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

std::size_t page_round(std::size_t bytes) { return (bytes + 4095) & ~std::size_t{4095}; }

// A random 24-bit start PSN, so a stale packet from an earlier QP with the same number is
// unlikely to be taken as in sequence.
std::uint32_t random_psn() {
  thread_local std::mt19937 generator{std::random_device{}()};
  return static_cast<std::uint32_t>(generator()) & 0xffffff;
}

}  // namespace

RingGeometry ring_geometry(std::uint32_t max_message) {
  RingGeometry g;
  g.slot_bytes = std::max<std::uint32_t>(64, (max_message + 63) & ~63u);
  std::uint32_t slots = kMaxSlots;
  while (slots > kMinSlots && std::uint64_t{slots} * g.slot_bytes > kRingTargetBytes) slots /= 2;
  g.slots = slots;
  return g;
}

struct RdmaChannel::Peer {
  std::uint32_t index = 0;
  std::string label;  // "rank 2 (qp 0x11, remote qp 0x12)"
  ibv_qp* qp = nullptr;
  std::uint32_t psn = 0;
  std::byte* ring = nullptr;           // inbound: the peer writes here
  std::byte* staging = nullptr;        // outbound copies
  std::uint64_t* credit_in = nullptr;  // the peer writes how many of our messages it consumed
  std::uint64_t remote_ring = 0;
  std::uint32_t remote_ring_rkey = 0;
  std::uint64_t remote_credit = 0;
  std::uint32_t remote_credit_rkey = 0;
  bool connected = false;

  // Send side: counters of data messages and of send-queue WRs.
  std::uint64_t sent = 0;
  std::uint64_t data_done = 0;       // data messages whose write completed
  std::uint64_t credit_cache = 0;    // last credit word read
  std::uint64_t sq_posted = 0;
  std::uint64_t sq_done = 0;
  std::uint64_t signaled_end = 0;    // sq_posted just after the last signalled WR
  std::vector<std::uint64_t> data_at;  // by sq position % send_depth: `sent` after that WR
  std::uint64_t user_end = 0;        // sq_posted just after the last WR reading user memory
  std::uint32_t closes_in_flight = 0;

  // Receive side.
  std::uint64_t arrived = 0;
  std::uint64_t delivered = 0;
  std::uint64_t released = 0;
  std::uint64_t credit_returned = 0;
  bool credit_pending = false;
  std::vector<std::uint32_t> lens;   // by message number % slots
  std::uint32_t recv_unposted = 0;
  std::vector<ibv_recv_wr> recv_chain;  // recv_batch linked zero-length WRs, reused

  std::string gone;                  // first failure seen ("closed its rdma transport", a wc status)
  std::uint32_t lost = kNoProcess;   // the process this peer said it lost when it closed
};

RdmaChannel::RdmaChannel(std::uint32_t index, const DriverContext& ctx, Device& device, MrCache& cache)
    : index_(index), max_message_(ctx.max_message), device_(device), cache_(cache), pos_of_(ctx.processes.size(), -1) {
  for (std::uint32_t p = 0; p < ctx.processes.size(); ++p) process_names_.push_back(process_name(ctx, p));
}

void RdmaChannel::drain_cq_events() noexcept {
  if (events_ == nullptr) return;
  unsigned int events = 0;
  ibv_cq* cq = nullptr;
  void* context = nullptr;
  while (ibv_get_cq_event(events_, &cq, &context) == 0) ++events;  // non-blocking descriptor
  if (events > 0) ibv_ack_cq_events(cq_, events);
}

void RdmaChannel::arm() {
  if (events_ == nullptr || cq_ == nullptr) return;
  drain_cq_events();
  ibv_req_notify_cq(cq_, 0);
}

RdmaChannel::~RdmaChannel() {
  // Reverse order of creation: QPs, CQ, registrations, memory.
  for (auto& peer : peers_)
    if (peer->qp != nullptr) ibv_destroy_qp(peer->qp);
  if (cq_ != nullptr) {
    drain_cq_events();  // ibv_destroy_cq waits for every event to be acknowledged
    ibv_destroy_cq(cq_);
  }
  if (events_ != nullptr) ibv_destroy_comp_channel(events_);
  if (inbound_ != nullptr) {
    cache_.evict(inbound_, inbound_bytes_);
    munmap(inbound_, inbound_bytes_);
  }
  if (staging_ != nullptr) {
    cache_.evict(staging_, staging_bytes_);
    munmap(staging_, staging_bytes_);
  }
}

Status RdmaChannel::create(std::uint32_t index, const DriverContext& ctx, Device& device, MrCache& cache,
                           std::unique_ptr<RdmaChannel>* out) {
  std::unique_ptr<RdmaChannel> channel(new RdmaChannel(index, ctx, device, cache));
  Status status = channel->allocate(ctx);
  if (!status.ok()) return status;
  *out = std::move(channel);
  return Status::Ok();
}

Status RdmaChannel::allocate(const DriverContext& ctx) {
  size_queues();
  const std::size_t npeers = ctx.peers.size();
  const std::size_t ring_bytes = std::size_t{geometry_.slots} * geometry_.slot_bytes;
  const std::string channel_text = "rdma channel " + std::to_string(index_);
  if (Status status = map_rings(npeers, ring_bytes, channel_text); !status.ok()) return status;
  if (Status status = create_completion_queue(npeers, channel_text); !status.ok()) return status;
  for (std::size_t i = 0; i < npeers; ++i)
    if (Status status = add_peer(ctx, i, ring_bytes); !status.ok()) return status;
  return Status::Ok();
}

// The ring geometry and queue depths (see rdma_channel.hpp): receives stay ahead of credits
// (slots in flight + a close), sends leave room for credit writes, keepalives and the close
// beside `slots` data writes.
void RdmaChannel::size_queues() {
  geometry_ = ring_geometry(max_message_);
  const std::uint32_t slots = geometry_.slots;
  recv_batch_ = std::max<std::uint32_t>(1, slots / 4);
  recv_depth_ = slots + recv_batch_ + 1;
  send_depth_ = slots + 8;
  signal_every_ = std::max<std::uint32_t>(1, slots / 4);
  credit_every_ = std::max<std::uint32_t>(1, slots / 4);
  max_sge_ = std::clamp<std::uint32_t>(static_cast<std::uint32_t>(device_.attr().max_sge), 1, kMaxSendSge);
}

// One receive ring and one credit line per peer (peers write into them), and one send staging
// ring per peer; both registered with the NIC.
Status RdmaChannel::map_rings(std::size_t npeers, std::size_t ring_bytes, const std::string& channel_text) {
  inbound_bytes_ = page_round(npeers * ring_bytes + npeers * kCreditLine);
  staging_bytes_ = page_round(std::max<std::size_t>(1, npeers * ring_bytes));
  inbound_ = static_cast<std::byte*>(map_zeroed(inbound_bytes_));
  if (inbound_ == nullptr)
    return Status(ErrorCode::no_resource, "cannot map " + std::to_string(inbound_bytes_) + " bytes for rdma channel " +
                                              std::to_string(index_) + "'s receive rings: " + errno_text(errno));
  staging_ = static_cast<std::byte*>(map_zeroed(staging_bytes_));
  if (staging_ == nullptr)
    return Status(ErrorCode::no_resource, "cannot map " + std::to_string(staging_bytes_) + " bytes for rdma channel " +
                                              std::to_string(index_) + "'s send staging: " + errno_text(errno));
  Status status = cache_.get(inbound_, inbound_bytes_, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
                             "receive rings of " + channel_text, &inbound_keys_);
  if (!status.ok()) return status;
  return cache_.get(staging_, staging_bytes_, IBV_ACCESS_LOCAL_WRITE, "send staging of " + channel_text, &staging_keys_);
}

// One completion queue for every peer's sends and receives, with a completion channel when
// the device gives one.
Status RdmaChannel::create_completion_queue(std::size_t npeers, const std::string& channel_text) {
  const std::uint64_t wanted_cqe = npeers * (std::uint64_t{send_depth_} + recv_depth_);
  const int cqe = static_cast<int>(std::min<std::uint64_t>(std::max<std::uint64_t>(wanted_cqe, 1),
                                                           static_cast<std::uint64_t>(device_.attr().max_cqe)));
  // A completion channel costs nothing until armed; it lets idle progress threads sleep
  // (SPARCOLL_POLL_MODE=event) instead of busy-polling the CQ.
  events_ = ibv_create_comp_channel(device_.context());
  if (events_ != nullptr) {
    const int flags = fcntl(events_->fd, F_GETFL);
    if (flags < 0 || fcntl(events_->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
      ibv_destroy_comp_channel(events_);
      events_ = nullptr;
    }
  }
  cq_ = ibv_create_cq(device_.context(), cqe, nullptr, events_, 0);
  if (cq_ == nullptr)
    return Status(ErrorCode::system_error, "ibv_create_cq (" + std::to_string(cqe) + " entries) for " + channel_text +
                                               " failed: " + errno_text(errno));
  return Status::Ok();
}

// Peer i (ctx.peers[i]): its slices of the rings, its qp, and every receive posted before the
// peer can write (before RTR).
Status RdmaChannel::add_peer(const DriverContext& ctx, std::size_t i, std::size_t ring_bytes) {
  const std::size_t npeers = ctx.peers.size();
  auto peer = std::make_unique<Peer>();
  peer->index = ctx.peers[i];
  peer->ring = inbound_ + i * ring_bytes;
  peer->staging = staging_ + i * ring_bytes;
  peer->credit_in = reinterpret_cast<std::uint64_t*>(inbound_ + npeers * ring_bytes + i * kCreditLine);
  peer->data_at.assign(send_depth_, 0);
  peer->lens.assign(geometry_.slots, 0);
  peer->psn = random_psn();
  std::uint32_t inline_bytes = 0;
  Status status = create_qp(device_.pd(), cq_, device_.choice(), QpSizes{send_depth_, recv_depth_, max_sge_}, &peer->qp,
                            &inline_bytes);
  if (!status.ok()) return status;
  max_inline_ = i == 0 ? inline_bytes : std::min(max_inline_, inline_bytes);
  peer->label = process_name(ctx, peer->index) + " (qp " + hex(peer->qp->qp_num) + ")";
  peer->recv_chain.resize(recv_batch_);
  for (std::uint32_t k = 0; k < recv_batch_; ++k) {
    ibv_recv_wr& wr = peer->recv_chain[k];
    wr = ibv_recv_wr {};
    wr.wr_id = kRecvTag | i;
    wr.next = k + 1 < recv_batch_ ? &peer->recv_chain[k + 1] : nullptr;
  }
  // Receives must be posted before the peer can write: all of them now, before RTR.
  peer->recv_unposted = recv_depth_;
  while (peer->recv_unposted >= recv_batch_) {
    ibv_recv_wr* bad = nullptr;
    if (int err = ibv_post_recv(peer->qp, peer->recv_chain.data(), &bad); err != 0)
      return Status(ErrorCode::system_error, "posting receives on the qp to " + peer->label + " failed: " + errno_text(err));
    peer->recv_unposted -= recv_batch_;
  }
  if (peer->recv_unposted > 0) {
    ibv_recv_wr* bad = nullptr;
    ibv_recv_wr& last = peer->recv_chain[peer->recv_unposted - 1];
    ibv_recv_wr* saved = last.next;
    last.next = nullptr;
    const int err = ibv_post_recv(peer->qp, peer->recv_chain.data(), &bad);
    last.next = saved;
    if (err != 0)
      return Status(ErrorCode::system_error, "posting receives on the qp to " + peer->label + " failed: " + errno_text(err));
    peer->recv_unposted = 0;
  }
  pos_of_[peer->index] = static_cast<std::int32_t>(i);
  peers_.push_back(std::move(peer));
  return Status::Ok();
}

Endpoint RdmaChannel::local_endpoint(std::size_t peer_pos) const {
  const Peer& peer = *peers_[peer_pos];
  Endpoint e;
  e.qpn = peer.qp->qp_num;
  e.psn = peer.psn;
  e.lid = device_.choice().lid;
  e.gid = device_.choice().gid;
  e.mtu = device_.choice().mtu;
  e.ring_addr = reinterpret_cast<std::uintptr_t>(peer.ring);
  e.ring_rkey = inbound_keys_.rkey;
  e.slots = geometry_.slots;
  e.slot_bytes = geometry_.slot_bytes;
  e.credit_addr = reinterpret_cast<std::uintptr_t>(peer.credit_in);
  e.credit_rkey = inbound_keys_.rkey;
  return e;
}

Status RdmaChannel::connect(std::size_t peer_pos, const Endpoint& remote, const std::string& peer_name) {
  Peer& peer = *peers_[peer_pos];
  if (remote.slots != geometry_.slots || remote.slot_bytes != geometry_.slot_bytes)
    return Status(ErrorCode::mismatch, peer_name + " uses rdma rings of " + std::to_string(remote.slots) + " x " +
                                           std::to_string(remote.slot_bytes) + " bytes, this process " +
                                           std::to_string(geometry_.slots) + " x " + std::to_string(geometry_.slot_bytes) +
                                           " (the processes disagree on SPARCOLL_MAX_MESSAGE)");
  peer.label = peer_name + " (qp " + hex(peer.qp->qp_num) + ", remote qp " + hex(remote.qpn) + ")";
  Status status = connect_qp(peer.qp, device_.choice(), peer.psn, remote, peer.label);
  if (!status.ok()) return status;
  peer.remote_ring = remote.ring_addr;
  peer.remote_ring_rkey = remote.ring_rkey;
  peer.remote_credit = remote.credit_addr;
  peer.remote_credit_rkey = remote.credit_rkey;
  peer.connected = true;
  return Status::Ok();
}

void RdmaChannel::fail(ErrorCode code, std::string message) {
  if (error_.ok()) error_ = Status(code, std::move(message) + " (seen on rdma channel " + std::to_string(index_) + ")");
}

void RdmaChannel::fail_on(Peer& peer) {
  // The root cause: the process the peer said it lost when it closed, else the peer itself.
  if (error_.ok()) lost_ = peer.lost != kNoProcess ? peer.lost : peer.index;
  fail(ErrorCode::peer_failure, peer.label + " " + peer.gone);
}

bool RdmaChannel::post(Peer& peer, ibv_send_wr& wr, bool force_signal) {
  if (peer.sq_posted - peer.sq_done >= send_depth_) return false;
  const std::uint64_t position = peer.sq_posted;
  // Selective signalling: a completion every signal_every WRs frees everything before it.
  const bool signal = force_signal || position + 1 - peer.signaled_end >= signal_every_;
  wr.wr_id = (static_cast<std::uint64_t>(pos_of_[peer.index]) << 48) | (position & kLowMask);
  if (signal) wr.send_flags |= IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  if (int err = ibv_post_send(peer.qp, &wr, &bad); err != 0) {
    fail(ErrorCode::system_error, "posting a write to " + peer.label + " failed: " + errno_text(err));
    return false;
  }
  ++peer.sq_posted;
  if (signal) peer.signaled_end = peer.sq_posted;
  return true;
}

SendResult RdmaChannel::send_message(std::uint32_t peer_index, const struct iovec* iov, int iovcnt,
                                     const UserMemory* user) {
  if (!error_.ok()) return SendResult::error;
  if (peer_index >= pos_of_.size() || pos_of_[peer_index] < 0) {
    fail(ErrorCode::invalid_argument, "send to process " + std::to_string(peer_index) + ", which is not a peer");
    return SendResult::error;
  }
  Peer& peer = *peers_[static_cast<std::size_t>(pos_of_[peer_index])];
  std::uint64_t len = 0;
  for (int i = 0; i < iovcnt; ++i) len += iov[i].iov_len;
  if (len > max_message_) {
    error_ = Status(ErrorCode::invalid_argument, "message of " + std::to_string(len) + " bytes to " + peer.label +
                                                     " exceeds the max message of " + std::to_string(max_message_) +
                                                     " bytes on rdma channel " + std::to_string(index_));
    return SendResult::error;
  }
  if (!peer.gone.empty()) {
    fail_on(peer);
    return SendResult::error;
  }
  const std::uint32_t slots = geometry_.slots;
  if (peer.sent - peer.credit_cache >= slots) {
    // The NIC writes the credit word; an acquire load orders it before reusing the slot.
    peer.credit_cache = __atomic_load_n(peer.credit_in, __ATOMIC_ACQUIRE);
    if (peer.sent - peer.credit_cache >= slots) return SendResult::no_resource;
  }
  if (peer.sent - peer.data_done >= slots || peer.sq_posted - peer.sq_done >= send_depth_) {
    progress();
    if (!error_.ok()) return SendResult::error;
    if (peer.sent - peer.data_done >= slots || peer.sq_posted - peer.sq_done >= send_depth_) return SendResult::no_resource;
  }
  const std::uint64_t slot = peer.sent & (slots - 1);
  std::byte* staged = peer.staging + slot * geometry_.slot_bytes;
  ibv_sge sges[kMaxSendSge];
  ibv_sge& sge = sges[0];
  sge = ibv_sge {};
  sge.length = static_cast<std::uint32_t>(len);
  sge.lkey = staging_keys_.lkey;
  // Zero-copy when the message is too big to go inline and fits max_sge_ gather entries.
  const int gathered = user != nullptr && len > max_inline_ ? gather(iov, iovcnt, *user, staged, sges) : 0;
  const bool zero_copy = gathered > 0;
  const int nsge = zero_copy ? gathered : (len > 0 ? 1 : 0);
  if (zero_copy) {
    // sges[] is filled.
  } else if (len <= max_inline_ && iovcnt == 1) {
    sge.addr = reinterpret_cast<std::uintptr_t>(iov[0].iov_base);  // inline copies at post time
  } else {
    std::byte* to = staged;
    for (int i = 0; i < iovcnt; ++i) {
      if (iov[i].iov_len == 0) continue;
      std::memcpy(to, iov[i].iov_base, iov[i].iov_len);
      to += iov[i].iov_len;
    }
    sge.addr = reinterpret_cast<std::uintptr_t>(staged);
  }
  ibv_send_wr wr {};
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.sg_list = nsge > 0 ? sges : nullptr;
  wr.num_sge = nsge;
  wr.imm_data = htonl(static_cast<std::uint32_t>(len));
  wr.send_flags = len <= max_inline_ ? IBV_SEND_INLINE : 0;
  wr.wr.rdma.remote_addr = peer.remote_ring + slot * geometry_.slot_bytes;
  wr.wr.rdma.rkey = peer.remote_ring_rkey;
  const std::uint64_t position = peer.sq_posted;
  // A zero-copy WR is signalled: its own completion is what releases the user's memory.
  if (!post(peer, wr, zero_copy)) return error_.ok() ? SendResult::no_resource : SendResult::error;
  ++peer.sent;
  peer.data_at[position % send_depth_] = peer.sent;
  if (zero_copy) {
    peer.user_end = peer.sq_posted;
    if (!zero_copy_logged_) {  // once per channel: shows zero-copy is on without logging per message
      zero_copy_logged_ = true;
      SC_LOG_INFO("rdma channel %u: zero-copy write from registered user memory to %s (%d gather entries)", index_,
                  peer.label.c_str(), nsge);
    }
  }
  return SendResult::ok;
}

int RdmaChannel::gather(const struct iovec* iov, int iovcnt, const UserMemory& user, std::byte* staged,
                        ibv_sge* sges) const {
  const auto user_begin = reinterpret_cast<std::uintptr_t>(user.base);
  const std::uintptr_t user_end = user_begin + user.len;
  int n = 0;
  std::byte* copy_to = staged;
  for (int i = 0; i < iovcnt; ++i) {
    const auto addr = reinterpret_cast<std::uintptr_t>(iov[i].iov_base);
    const std::size_t len = iov[i].iov_len;
    if (len == 0) continue;
    const bool in_place = addr >= user_begin && addr + len <= user_end;
    std::uintptr_t from = addr;
    std::uint32_t lkey = user.key;
    if (!in_place) {
      std::memcpy(copy_to, iov[i].iov_base, len);
      from = reinterpret_cast<std::uintptr_t>(copy_to);
      lkey = staging_keys_.lkey;
      copy_to += len;
    }
    // Adjacent pieces with the same key merge (consecutive blocks, the copied header parts).
    if (n > 0 && sges[n - 1].lkey == lkey && sges[n - 1].addr + sges[n - 1].length == from) {
      sges[n - 1].length += static_cast<std::uint32_t>(len);
      continue;
    }
    if (n == static_cast<int>(max_sge_)) return 0;
    sges[n].addr = from;
    sges[n].length = static_cast<std::uint32_t>(len);
    sges[n].lkey = lkey;
    ++n;
  }
  return n;
}

bool RdmaChannel::user_memory_released() {
  progress();
  for (const auto& peer : peers_)
    if (peer->sq_done < peer->user_end) return false;
  return true;
}

bool RdmaChannel::post_credit(Peer& peer, bool signaled) {
  // Inline: the value is copied when posted, so later updates cannot tear it.
  std::uint64_t value = peer.released;
  ibv_sge sge {};
  sge.addr = reinterpret_cast<std::uintptr_t>(&value);
  sge.length = sizeof value;
  sge.lkey = staging_keys_.lkey;
  ibv_send_wr wr {};
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_INLINE;
  wr.wr.rdma.remote_addr = peer.remote_credit;
  wr.wr.rdma.rkey = peer.remote_credit_rkey;
  const std::uint64_t position = peer.sq_posted;
  if (!post(peer, wr, signaled)) {
    peer.credit_pending = true;
    return false;
  }
  peer.data_at[position % send_depth_] = peer.sent;
  peer.credit_returned = value;
  peer.credit_pending = false;
  return true;
}

void RdmaChannel::on_send_done(Peer& peer, std::uint64_t wr_low) {
  // Rebuild the full sq position from its low 48 bits: it is at most send_depth behind.
  const std::uint64_t position = peer.sq_posted - ((peer.sq_posted - wr_low) & kLowMask);
  if (position + 1 > peer.sq_done) {
    peer.sq_done = position + 1;
    peer.data_done = std::max(peer.data_done, peer.data_at[position % send_depth_]);
  }
}

void RdmaChannel::on_arrival(Peer& peer, std::uint32_t imm) {
  ++peer.recv_unposted;
  if ((imm & kCloseFlag) != 0) {
    if (peer.gone.empty()) {
      peer.gone = "closed its rdma transport";
      // A lost process out of range (a hostile or garbled imm) is ignored: the close stands.
      const std::uint32_t lost = (imm & ~kCloseFlag) - 1;
      if ((imm & ~kCloseFlag) != 0 && lost < process_names_.size() && lost != peer.index) {
        peer.lost = lost;
        peer.gone += " after losing " + process_names_[lost];
      }
    }
    any_gone_ = true;
    return;
  }
  if (imm > max_message_ || peer.arrived - peer.released >= geometry_.slots) {
    fail(ErrorCode::protocol_error, peer.label + " wrote a message of " + std::to_string(imm) + " bytes with " +
                                        std::to_string(peer.arrived - peer.released) + " of " +
                                        std::to_string(geometry_.slots) +
                                        " slots unreleased (max message or credits violated)");
    return;
  }
  peer.lens[peer.arrived & (geometry_.slots - 1)] = imm;
  ++peer.arrived;
}

void RdmaChannel::on_failed(Peer& peer, const ibv_wc& wc) {
  // The first failure is the cause; the flushes that follow it say nothing new.
  if (peer.gone.empty()) {
    peer.gone = std::string("failed: ") + ibv_wc_status_str(wc.status) + " (status " + std::to_string(wc.status) +
                ", vendor error " + hex(wc.vendor_err) + ")";
    SC_LOG_DEBUG("rdma channel %u: %s %s", index_, peer.label.c_str(), peer.gone.c_str());
  }
  any_gone_ = true;
}

void RdmaChannel::repost_receives(Peer& peer) {
  if (peer.recv_unposted < recv_batch_ || !peer.gone.empty()) return;
  ibv_recv_wr* bad = nullptr;
  if (int err = ibv_post_recv(peer.qp, peer.recv_chain.data(), &bad); err != 0) {
    fail(ErrorCode::system_error, "re-posting receives on the qp to " + peer.label + " failed: " + errno_text(err));
    return;
  }
  peer.recv_unposted -= recv_batch_;
}

void RdmaChannel::progress() {
  ibv_wc wcs[kPollBatch];
  for (;;) {
    const int n = ibv_poll_cq(cq_, kPollBatch, wcs);
    if (n < 0) {
      fail(ErrorCode::system_error, "ibv_poll_cq failed");
      return;
    }
    for (int i = 0; i < n; ++i) {
      const ibv_wc& wc = wcs[i];
      const bool recv = (wc.wr_id & kRecvTag) != 0;
      const std::size_t pos = recv ? static_cast<std::size_t>(wc.wr_id & ~kRecvTag) : static_cast<std::size_t>(wc.wr_id >> 48);
      if (pos >= peers_.size()) continue;
      Peer& peer = *peers_[pos];
      if (wc.status != IBV_WC_SUCCESS) {
        on_failed(peer, wc);
      } else if (recv) {
        on_arrival(peer, ntohl(wc.imm_data));
      } else {
        on_send_done(peer, wc.wr_id & kLowMask);
      }
    }
    if (n < kPollBatch) break;
  }
  for (auto& peer : peers_) repost_receives(*peer);
}

int RdmaChannel::poll(ReceivedMessage* out, int max) {
  if (!error_.ok()) return -1;
  // Messages handed out by the previous poll are consumed: their slots go back to the sender.
  for (auto& p : peers_) {
    Peer& peer = *p;
    peer.released = peer.delivered;
    if (peer.gone.empty() && (peer.credit_pending || peer.released - peer.credit_returned >= credit_every_))
      post_credit(peer, false);
  }
  progress();
  if (!error_.ok()) return -1;

  int n = 0;
  const std::size_t count = peers_.size();
  for (std::size_t k = 0; k < count && n < max; ++k) {
    std::size_t pos = next_first_ + k;
    if (pos >= count) pos -= count;
    Peer& peer = *peers_[pos];
    while (n < max && peer.delivered < peer.arrived) {
      const std::uint64_t slot = peer.delivered & (geometry_.slots - 1);
      out[n++] = ReceivedMessage{peer.index, peer.ring + slot * geometry_.slot_bytes, peer.lens[slot]};
      ++peer.delivered;
    }
  }
  if (++next_first_ >= count) next_first_ = 0;

  if (++polls_ % kPollsPerClockRead == 0) keepalive();
  if (any_gone_ && fail_drained_gone_peer()) return n > 0 ? n : -1;  // the error shows at the next poll
  if (!error_.ok()) return n > 0 ? n : -1;
  return n;
}

void RdmaChannel::keepalive() {
  const std::uint64_t now = coarse_now_ns();
  if (now < next_keepalive_ns_) return;
  next_keepalive_ns_ = now + kKeepaliveNs;
  for (auto& peer : peers_) {
    // A signalled WR in flight already watches the connection.
    if (!peer->connected || !peer->gone.empty() || peer->signaled_end > peer->sq_done) continue;
    post_credit(*peer, true);
  }
}

bool RdmaChannel::fail_drained_gone_peer() {
  for (auto& peer : peers_) {
    if (peer->gone.empty() || peer->delivered < peer->arrived) continue;
    fail_on(*peer);
    return true;
  }
  return false;
}

bool RdmaChannel::flushed() {
  if (!error_.ok()) return true;  // nothing more will leave
  progress();
  bool done = true;
  for (auto& peer : peers_) {
    if (!peer->gone.empty() || peer->sq_done == peer->sq_posted) continue;
    done = false;
    // Unsignalled WRs at the tail never complete on their own: follow them with a signalled one.
    if (peer->signaled_end <= peer->sq_done) post_credit(*peer, true);
  }
  return done;
}

void RdmaChannel::post_close(std::uint32_t lost) {
  const std::uint32_t imm = kCloseFlag | (lost < process_names_.size() ? lost + 1 : 0);
  for (auto& peer : peers_) {
    if (!peer->connected || !peer->gone.empty()) continue;
    ibv_send_wr wr {};
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.num_sge = 0;
    wr.imm_data = htonl(imm);
    wr.wr.rdma.remote_addr = peer->remote_ring;
    wr.wr.rdma.rkey = peer->remote_ring_rkey;
    const std::uint64_t position = peer->sq_posted;
    if (!post(*peer, wr, true)) continue;  // queue full or broken: the peer will see the QP fail instead
    peer->data_at[position % send_depth_] = peer->sent;
    peer->closes_in_flight = 1;
  }
}

bool RdmaChannel::close_done() {
  progress();
  for (auto& peer : peers_)
    if (peer->closes_in_flight != 0 && peer->gone.empty() && peer->sq_done < peer->sq_posted) return false;
  return true;
}

void RdmaChannel::destroy_qps_abruptly() {
  for (auto& peer : peers_) {
    if (peer->qp != nullptr) ibv_destroy_qp(peer->qp);
    peer->qp = nullptr;
    peer->connected = false;
    peer->gone = "was destroyed by a test";
  }
}

}  // namespace sparcoll::transport::rdma
