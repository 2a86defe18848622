// One dpdk channel: reliable, ordered message delivery to every peer over UDP frames.
//
// Per (channel, peer), selective repeat over the messages actually sent:
//   send side   a window of W retained frames (the mbufs themselves, preallocated in the
//               channel's mempool): send() builds the frame once, transmits it, keeps it until
//               the peer acknowledges it; a retransmission re-sends the same mbuf (reference
//               count), so recovery costs no copy and never sends anything but lost frames.
//               no_resource when the window is full or the peer has no room (its `limit`).
//   receive     a reorder buffer of W slots holding out-of-order mbufs; messages are
//               handed to the engine in place, exactly once and in order; duplicates are
//               dropped and counted.
//   acks        every frame carries ack (all below arrived), a 64-bit SACK bitmap above it and
//               limit (room for every seq below): piggybacked on data, standalone after 16
//               arrivals, ~100 us of quiet, a hole, a duplicate, or a quarter window delivered.
//   timers      an RTO per peer from smoothed RTT (Karn: samples from frames sent once),
//               2 ms .. 200 ms with exponential backoff. Before that, a frame is re-sent at
//               once when three later frames were SACKed (first transmissions) or when a frame
//               transmitted after it arrived (RACK-style: links keep a flow in order). A peer
//               that acknowledges nothing for `liveness_ms` while data is outstanding fails the
//               channel, named. The estimate, the timeout, the SACK bitmap and the
//               loss rules are dpdk_reliability.hpp, which builds and is tested without DPDK.
//   zero-copy   send(…, UserMemory): iov parts of at least kZeroCopyMin bytes inside the
//               registered user memory are not copied: the frame is a chain, a header mbuf
//               (headers + the small parts, copied) followed by mbufs attached to the user's
//               bytes as external buffers (rte_pktmbuf_attach_extbuf). The device reads them when
//               it transmits (memif and af_packet copy them into their rings); the chain is
//               retained like any frame (every segment's refcount) and retransmissions read the
//               user memory again. Each attached mbuf keeps its shared info in its own unused
//               data room; its free callback counts it down, and user_memory_released() is true
//               when no attached mbuf is alive (every such frame acknowledged and transmitted).
//               To a peer whose link is our memif zero-copy client link (copy_user_memory),
//               such sends copy: that link's descriptors can only name EAL memory.
//   closing     FIN (seq = data messages sent) / FIN_ACK ("I will not touch our link again");
//               in a simultaneous close the lower process index answers, the higher one waits
//               for the answer and then closes the link (see docs/dpdk.md).
//
// Receive steering: the channel polls its RX queues (in port mode without rte_flow rules, every
// queue, one reader at a time); a frame for another channel goes into that
// channel's rte_ring (multi-producer, single consumer), which every channel drains in poll().
// Frames are validated field by field (dpdk_wire.hpp, then against the peer's state); anything
// invalid is counted in dropped_invalid and freed.
//
// Hot path: bursts of 32, no allocation, no lock, no syscall, no logging.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dpdk_rte.hpp"
#include "dpdk_wire.hpp"
#include "transport/driver.hpp"

namespace sparcoll::transport::dpdk {

// Messages in flight per (channel, peer): the window, a power of two between kMinWindow and
// kMaxWindow. Deep enough to keep a memif ring (1024 buffers) full while the receiving process
// is descheduled, within a bounded pool: each peer costs two windows of mbufs (retained sends,
// reorder buffer), so a process with many peers gets a smaller window per peer.
inline constexpr std::uint32_t kMinWindow = 256;
inline constexpr std::uint32_t kMaxWindow = 1024;
constexpr std::uint32_t window_for(std::uint32_t peers) {
  std::uint32_t w = kMaxWindow;
  while (w > kMinWindow && w * peers > 2 * kMaxWindow) w /= 2;
  return w;
}
inline constexpr std::uint32_t kBurst = 32;
// Per-lcore mempool cache (mbufs): a LIFO of recently freed mbufs, so the next frame is built in
// (and the device receives into) memory still in cache. Each thread that touches a pool may hold
// up to 1.5x this many of its mbufs; pools are sized for it (dpdk_driver.cpp).
inline constexpr std::uint32_t kPoolCache = 128;
inline constexpr std::uint32_t kRingSize = 512;    // software steering ring per channel
inline constexpr std::uint32_t kMaxDeliver = 256;  // messages handed out by one poll()
// Zero-copy: smaller iov parts are copied into the header mbuf (a segment costs more than
// copying them), and a frame has at most kMaxSegments segments (else it is copied whole): the
// header and a window of 8 scattered blocks (SPARCOLL_FUSION) fit; a device may allow fewer.
inline constexpr std::size_t kZeroCopyMin = 256;
inline constexpr std::uint16_t kMaxSegments = 16;

// A (port, queue) the channel polls. peer_pos >= 0: a memif port that only talks to that peer.
struct RxSource {
  std::uint16_t port = 0;
  std::uint16_t queue = 0;
  std::int32_t peer_pos = -1;
  // A shared-port queue that several channels read (see the driver's port mode): whoever reads
  // it holds this flag for the burst, and a channel that finds it held skips the queue.
  std::atomic<bool>* reader = nullptr;
};

// A (port, queue) the channel transmits on, with its software backlog.
struct TxTarget {
  std::uint16_t port = 0;
  std::uint16_t queue = 0;
  std::int32_t peer_pos = -1;
  std::uint32_t capacity = 0;  // backlog entries
};

struct PeerSetup {
  std::uint32_t index = 0;
  std::string label;           // "rank 2 (mac 02:53:43:00:00:02, 10.0.0.3:47000)"
  MacAddr mac;                 // the peer's, as it sends and receives on this channel
  std::uint32_t ip = 0;
  std::uint16_t udp_port = 0;  // the peer's port for this channel
  std::uint64_t job_id = 0;
  std::uint32_t target = 0;    // index into ChannelSetup::targets
  // Sends to it never chain user memory: our side of its link is a memif zero-copy client,
  // whose descriptors can only name EAL memory (dpdk_driver.cpp).
  bool copy_user_memory = false;
};

struct ChannelSetup {
  std::uint32_t index = 0;
  std::uint32_t channels = 1;
  std::uint32_t self = 0;
  std::uint32_t processes = 0;
  MacAddr mac;                 // mine, on this channel's port(s)
  std::uint32_t ip = 0;
  std::uint16_t udp_port = 0;  // mine, for this channel
  std::uint32_t max_message = 0;
  std::uint32_t window = kMinWindow;  // window_for(peers.size())
  std::string limit_note;      // why max_message is what it is, for the oversized-send error
  std::uint32_t drop_every = 0;
  std::uint32_t liveness_ms = 30000;
  bool memif = true;
  bool ip_checksum_offload = false;
  bool udp_checksum_offload = false;
  bool rx_checksum_offload = false;
  // send(…, UserMemory) may chain user memory as external buffers: every port this channel
  // transmits on takes multi-segment frames (RTE_ETH_TX_OFFLOAD_MULTI_SEGS), and the driver
  // accepted the memory (register_memory). False: such sends copy.
  bool zero_copy = false;
  std::uint16_t max_segments = kMaxSegments;  // per frame (a device's nb_mtu_seg_max may be lower)
  std::vector<RxSource> rx;
  std::vector<TxTarget> targets;
  std::vector<PeerSetup> peers;
  rte_mempool* pool = nullptr;
  // Small mbufs (no data room to speak of) for attaching user memory; nullptr without zero-copy.
  rte_mempool* ext_pool = nullptr;
  std::vector<rte_ring*> rings;  // every channel's steering ring, by channel index
};

// What a dpdk channel counts, reported as named counters (counters(); docs/dpdk.md).
struct DpdkCounters {
  std::uint64_t packets_sent = 0;      // frames the device took (data and control)
  std::uint64_t packets_received = 0;  // frames that reached validation
  std::uint64_t retransmitted = 0;     // data frames sent again (the loss hook's drops included)
  std::uint64_t dropped_invalid = 0;   // frames that failed validation, freed unseen
  std::uint64_t duplicates = 0;        // data frames that had arrived already
  std::uint64_t dropped_by_hook = 0;   // data transmissions SPARCOLL_DPDK_DROP_EVERY suppressed
};

class DpdkChannel final : public Channel {
 public:
  explicit DpdkChannel(ChannelSetup setup);
  // Frees every mbuf the channel holds. The ports must be closed (or never touched again).
  ~DpdkChannel() override;

  using Channel::send;
  std::uint32_t max_message() const override { return max_message_; }
  SendResult send(std::uint32_t peer, const struct iovec* iov, int iovcnt) override;
  SendResult send(std::uint32_t peer, const struct iovec* iov, int iovcnt, const UserMemory& user) override;
  // True when no mbuf attached to user memory is alive (retained for retransmission, queued,
  // or in a device). Progresses acks like flushed() when some are.
  bool user_memory_released() override;
  int poll(ReceivedMessage* out, int max) override;
  // True when every message sent has been acknowledged (or never will be: the peer is gone).
  bool flushed() override;
  const Status& error() const override { return error_; }
  // Each thread that polls registers as an lcore and keeps mempool caches: one owner thread.
  bool any_thread() const override { return false; }
  bool acknowledges_when_polled() const override { return true; }
  // DpdkCounters by their field names: packets_sent, packets_received, retransmitted,
  // dropped_invalid, duplicates, dropped_by_hook.
  ChannelCounters counters() const override;

  // Test hook: copies a raw Ethernet frame into an mbuf and pushes it into the steering ring of
  // the channel its header names (this one if the name is out of range), so the next poll() of
  // that channel validates it exactly like received traffic. False if no mbuf was free or the
  // frame is larger than an mbuf.
  bool inject_for_test(const void* frame, std::size_t len);
  // Test hook: the headers of a valid DATA frame from `peer` to this channel (seq 0, ack fields
  // that acknowledge nothing new), for building frames by hand.
  bool frame_header_for_test(std::uint32_t peer, FrameHeader* out) const;

  // Teardown, driven by the driver once the engine no longer uses the channel.
  void begin_close();      // FIN to every peer that is still there
  void close_step();       // one round: receive (and discard), retransmit, answer, flush
  // This peer needs nothing more from us on this channel: its link may be closed.
  bool peer_finished(std::size_t pos) const;
  std::size_t peer_count() const { return peers_.size(); }
  // The driver closed the port of peer `pos` (or, with -1, the shared port): never touch it.
  void port_closed(std::int32_t pos);

 private:
  struct Peer;
  struct TxEntry {
    rte_mbuf* m;
    std::uint64_t seq;
    std::uint32_t peer;
    FrameType type;
  };
  struct Backlog;

  // Receive path.
  // Reads up to `budget` frames from the devices (all of the steering ring regardless).
  void receive(std::uint32_t budget = UINT32_MAX);
  void steer(rte_mbuf* m);
  void process(rte_mbuf* m);
  void on_ack_fields(Peer& p, const FrameHeader& h);
  bool on_data(Peer& p, const FrameHeader& h, rte_mbuf* m);  // true: m is kept
  void on_fin(Peer& p, const FrameHeader& h);
  int deliver(ReceivedMessage* out, int max);
  void release_delivered();
  bool memif_link_up(Peer& p, std::uint16_t port);
  void on_link_down(Peer& p);

  // Send path.
  void fill_ack(Peer& p, FrameHeader* h);
  rte_mbuf* build(Peer& p, FrameType type, std::uint64_t seq, const struct iovec* iov, int iovcnt, std::uint32_t len);
  // The zero-copy frame (see above); nullptr when out of mbufs or beyond kMaxSegments (then
  // *copy_instead is set and the caller builds a copied frame).
  rte_mbuf* build_chain(Peer& p, std::uint64_t seq, const struct iovec* iov, int iovcnt, std::uint32_t len,
                        const UserMemory& user, bool* copy_instead);
  SendResult send_message(std::uint32_t peer, const struct iovec* iov, int iovcnt, const UserMemory* user);
  static void on_user_buffer_free(void* addr, void* opaque);
  rte_mbuf* attach_user_bytes(std::uint8_t* from, std::size_t n, std::uintptr_t user_end);
  void transmit_data(Peer& p, std::uint64_t seq, bool at_timeout);
  bool queue_control(Peer& p, FrameType type);
  void respond(Peer& p);
  bool push(Backlog& b, const TxEntry& entry);
  void flush(Backlog& b);
  void flush_all();
  void discard(Backlog& b);
  void on_sent(const TxEntry& entry);

  // Timers and failure.
  void housekeeping();
  void on_timeout(Peer& p);
  std::uint64_t rto(const Peer& p) const;
  void arm_timer(Peer& p);
  void check_gone_peers();
  void fail(ErrorCode code, std::string message);
  bool touchable(const Peer& p) const;

  ChannelSetup setup_;
  std::uint32_t index_;
  std::uint32_t max_message_;
  std::uint64_t window_;  // W (a power of two)
  std::uint64_t mask_;    // W - 1
  RxExpect expect_;
  rte_mempool* pool_;
  rte_ring* ring_;
  std::vector<std::unique_ptr<Peer>> peers_;
  std::vector<std::int32_t> pos_of_;  // process index -> position in peers_, -1 if not a peer
  std::vector<std::unique_ptr<Backlog>> backlogs_;
  std::vector<rte_mbuf*> release_;    // handed out by the last poll, freed by the next
  std::size_t released_count_ = 0;
  std::size_t next_first_ = 0;
  std::size_t next_source_ = 0;  // the RX source read first by the next receive()
  bool shared_port_closed_ = false;
  bool closing_ = false;
  std::uint64_t now_ = 0;
  std::uint64_t data_transmissions_ = 0;  // for the drop hook
  std::uint64_t rng_ = 1;                 // xorshift state for timer jitter (jittered())
  // Clock constants in TSC cycles.
  std::uint64_t hz_ = 0;
  std::uint64_t rto_min_ = 0;
  std::uint64_t rto_max_ = 0;
  std::uint64_t rto_initial_ = 0;
  std::uint64_t ack_delay_ = 0;
  std::uint64_t fin_interval_ = 0;
  std::uint64_t link_settle_ = 0;
  std::uint64_t liveness_ = 0;
  DpdkCounters counters_;
  Status error_;
  // Mbufs attached to user memory that are alive; counted down by on_user_buffer_free (which
  // runs wherever the last reference is dropped: this thread, a device's tx path, teardown).
  std::atomic<std::uint64_t> user_buffers_live_{0};
  bool zero_copy_logged_ = false;
};

}  // namespace sparcoll::transport::dpdk
