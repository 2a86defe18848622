// One rdma channel: an RC QP to each peer, one CQ for all of them (polled by the channel's
// progress thread), and the registered memory messages move through.
//
// Memory, per channel (registered through the driver's MrCache):
//   inbound  (remote-writable): per peer a ring of `slots` fixed slots of `slot_bytes`, where
//            that peer RDMA-writes its messages to us; then per peer one 64-byte credit line
//            where that peer writes how many of OUR messages it has consumed;
//   staging  (local): per peer `slots` slots send() copies a message into before posting it.
//
// Data path, per (peer, channel), no lock, allocation or syscall:
//   send():  credits left (sent - credit word < slots) and the staging slot's previous write
//            completed -> copy the iovec into staging slot sent % slots, post
//            RDMA_WRITE_WITH_IMM to remote slot sent % slots with imm = length. Small messages
//            go inline; every signal_every-th WR is signalled (selective signalling).
//            Zero-copy (send with UserMemory): iov entries inside the registered user buffer
//            become gather entries read in place, the rest is copied into the staging slot;
//            such a WR is always signalled, and user_memory_released() is true once every
//            one of them completed.
//   arrive:  RC delivers writes in order, so the n-th immediate from a peer is slot n % slots;
//            its receive WR (zero-length) is re-posted in batches.
//   poll():  hands messages out in place; at the next poll they count as consumed, and every
//            slots/4 consumed messages the count is RDMA-written (inline) into the sender's
//            credit line.
//   keepalive: every 200 ms a peer with no signalled WR in flight gets a signalled credit
//            write, so a dead peer turns into a failed completion even on an idle channel.
//   close:   the driver destructor sends imm kCloseFlag, so peers learn at once; a process
//            closing because it lost a peer puts that peer's index + 1 in the imm's low bits,
//            so the others name the process that failed, not the one that left after it.
// Failures (a failed completion, a close, a protocol violation) are sticky; a peer's messages
// that arrived before its failure are delivered before the failure is reported.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rdma_device.hpp"
#include "rdma_mr_cache.hpp"
#include "rdma_qp.hpp"
#include "transport/driver.hpp"

namespace sparcoll::transport::rdma {

// imm = message length, or this flag for "closing" (lengths are at most 1 GiB), with the lost
// process's index + 1 (0: none) in the bits below it.
inline constexpr std::uint32_t kCloseFlag = 0x80000000u;
// No process: the channel did not fail because of a peer.
inline constexpr std::uint32_t kNoProcess = 0xffffffffu;

// Ring geometry every process derives from max_message (and checks against its peers').
struct RingGeometry {
  std::uint32_t slots = 0;       // a power of two
  std::uint32_t slot_bytes = 0;  // max_message rounded up to 64
};
RingGeometry ring_geometry(std::uint32_t max_message);

class RdmaChannel final : public Channel {
 public:
  ~RdmaChannel() override;

  // Creates the CQ, memory and one QP (in INIT, receives posted) per peer.
  static Status create(std::uint32_t index, const DriverContext& ctx, Device& device, MrCache& cache,
                       std::unique_ptr<RdmaChannel>* out);
  // What peer number `peer_pos` (position in ctx.peers) needs to connect to us.
  Endpoint local_endpoint(std::size_t peer_pos) const;
  // Connects our QP to peer `peer_pos` (RTR, RTS) and remembers where to write.
  Status connect(std::size_t peer_pos, const Endpoint& remote, const std::string& peer_name);

  std::uint32_t max_message() const override { return max_message_; }
  SendResult send(std::uint32_t peer, const struct iovec* iov, int iovcnt) override {
    return send_message(peer, iov, iovcnt, nullptr);
  }
  SendResult send(std::uint32_t peer, const struct iovec* iov, int iovcnt, const UserMemory& user) override {
    return send_message(peer, iov, iovcnt, &user);
  }
  bool user_memory_released() override;
  int poll(ReceivedMessage* out, int max) override;
  // Event mode: the completion channel's descriptor; arm() acknowledges what woke us and asks
  // the CQ for the next completion event.
  int wait_fd() override { return events_ != nullptr ? events_->fd : -1; }
  void arm() override;
  bool flushed() override;
  const Status& error() const override { return error_; }

  // The process whose failure (or close after losing another) failed this channel: the first
  // cause, kNoProcess when none was a peer's.
  std::uint32_t lost_process() const { return lost_; }
  // Teardown, step 1: tell every live peer we are closing, and which process we lost (from
  // whichever of the driver's channels saw it). Step 2: wait (bounded) for those writes to
  // complete; true when none is outstanding.
  void post_close(std::uint32_t lost);
  bool close_done();
  // Test hook: destroys the QPs without telling anyone, as a crash would.
  void destroy_qps_abruptly();

 private:
  struct Peer;

  RdmaChannel(std::uint32_t index, const DriverContext& ctx, Device& device, MrCache& cache);
  Status allocate(const DriverContext& ctx);
  // allocate()'s steps, in order.
  void size_queues();
  Status map_rings(std::size_t npeers, std::size_t ring_bytes, const std::string& channel_text);
  Status create_completion_queue(std::size_t npeers, const std::string& channel_text);
  Status add_peer(const DriverContext& ctx, std::size_t i, std::size_t ring_bytes);
  SendResult send_message(std::uint32_t peer, const struct iovec* iov, int iovcnt, const UserMemory* user);
  // Fills sges[] for a zero-copy write: user-memory entries in place, the rest copied to
  // `staged`. Returns the entry count, or 0 when more than max_sge_ would be needed.
  int gather(const struct iovec* iov, int iovcnt, const UserMemory& user, std::byte* staged, ibv_sge* sges) const;
  void progress();  // drains the CQ
  void on_send_done(Peer& peer, std::uint64_t wr_low);
  void on_arrival(Peer& peer, std::uint32_t imm);
  void on_failed(Peer& peer, const ibv_wc& wc);
  void repost_receives(Peer& peer);
  // Posts an inline write of our consumed count into the peer's credit line; false if the
  // send queue is full (retried at the next poll).
  bool post_credit(Peer& peer, bool signaled);
  bool post(Peer& peer, ibv_send_wr& wr, bool force_signal);
  void keepalive();
  bool fail_drained_gone_peer();
  void fail(ErrorCode code, std::string message);
  void fail_on(Peer& peer);  // a peer_failure naming `peer` and why it is gone

  std::uint32_t index_;
  std::uint32_t max_message_;
  Device& device_;
  MrCache& cache_;
  RingGeometry geometry_;
  std::uint32_t send_depth_ = 0;
  std::uint32_t recv_depth_ = 0;
  std::uint32_t recv_batch_ = 0;
  std::uint32_t signal_every_ = 0;
  std::uint32_t credit_every_ = 0;
  std::uint32_t max_inline_ = 0;
  std::uint32_t max_sge_ = 1;  // gather entries per send WR the QPs were created with
  bool zero_copy_logged_ = false;
  ibv_cq* cq_ = nullptr;
  ibv_comp_channel* events_ = nullptr;  // CQ notifications, for event mode
  void drain_cq_events() noexcept;
  std::byte* inbound_ = nullptr;  // rings, then credit lines
  std::size_t inbound_bytes_ = 0;
  std::byte* staging_ = nullptr;
  std::size_t staging_bytes_ = 0;
  MemoryKeys inbound_keys_;
  MemoryKeys staging_keys_;
  std::vector<std::unique_ptr<Peer>> peers_;
  std::vector<std::int32_t> pos_of_;  // process index -> position in peers_, -1 if not a peer
  std::vector<std::string> process_names_;  // by process index, for the process a closing peer lost
  std::uint32_t lost_ = kNoProcess;
  std::size_t next_first_ = 0;
  bool any_gone_ = false;
  std::uint32_t polls_ = 0;
  std::uint64_t next_keepalive_ns_ = 0;
  Status error_;
};

}  // namespace sparcoll::transport::rdma
