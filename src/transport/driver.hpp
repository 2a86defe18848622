// The transport interface every driver implements (drivers/<name>/).
//
// A driver gives reliable, per-peer ordered message delivery with back-pressure:
//   * send() gathers an iovec into one message to one peer; it never blocks: no_resource means
//     "nothing was queued, poll and retry" (the credit/ring is full);
//   * poll() hands out received messages, which stay valid (zero-copy, inside the driver's
//     receive buffers) until the next poll() on the same channel.
// A driver is chosen once at communicator setup; the engine calls it per message, never per
// block. Each progress thread owns one Channel; channel t of a process talks to channel t of
// every peer. Channels are not thread-safe.
//
// The RDMA driver implements a message as an RDMA write-with-immediate into a credit-managed
// ring at the receiver; packet drivers (DPDK) add their own header and loss recovery.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sparcoll/options.hpp"
#include "sparcoll/status.hpp"
#include "transport/setup_exchange.hpp"

namespace sparcoll::transport {

struct ReceivedMessage {
  std::uint32_t peer;        // sender's process index
  const std::byte* data;     // 8-byte aligned
  std::uint32_t size;
};

enum class SendResult : std::uint8_t { ok, no_resource, error };

// What a driver counts on a channel beyond the bytes and messages the core counts itself (dpdk:
// frames, resends, drops), as named cumulative values. The names are the driver's (string
// literals, the same set on every channel of a driver, documented with the driver); the core
// sums them by name over the process's channels and reports them with the driver's name in
// front (Communicator::transport_counters()). Drivers with nothing to count report none.
struct NamedCounter {
  const char* name = nullptr;
  std::uint64_t value = 0;
};
inline constexpr std::uint32_t kMaxChannelCounters = 8;
struct ChannelCounters {
  std::uint32_t count = 0;
  NamedCounter items[kMaxChannelCounters];
  // Appends a counter; beyond kMaxChannelCounters it is dropped (a driver's fixed set fits).
  void add(const char* name, std::uint64_t value) noexcept {
    if (count < kMaxChannelCounters) items[count++] = NamedCounter{name, value};
  }
  // The value of counter `name`, 0 when this channel has no such counter.
  std::uint64_t get(std::string_view name) const noexcept {
    for (std::uint32_t i = 0; i < count; ++i)
      if (name == items[i].name) return items[i].value;
    return 0;
  }
};

// User memory a driver may read in place (zero-copy) instead of copying it: what
// Driver::register_memory returned for a buffer. `key` is driver-specific (the rdma lkey).
struct UserMemory {
  const std::byte* base = nullptr;
  std::size_t len = 0;
  std::uint32_t key = 0;
};

class Channel {
 public:
  virtual ~Channel() = default;
  // Largest message send() accepts, in bytes.
  virtual std::uint32_t max_message() const = 0;
  // Queues one message made of iov[0..iovcnt) for `peer`. On ok the iov memory may be reused
  // at once. On error, error() names the peer and the cause.
  virtual SendResult send(std::uint32_t peer, const struct iovec* iov, int iovcnt) = 0;
  // The same, but iov entries inside `user` may be read in place after send returns: the
  // caller keeps that memory unchanged until user_memory_released(). Drivers without zero-copy
  // copy as send() does.
  virtual SendResult send(std::uint32_t peer, const struct iovec* iov, int iovcnt, const UserMemory& user) {
    (void)user;
    return send(peer, iov, iovcnt);
  }
  // True when no send that reads user memory in place is still in flight. The engine holds an
  // operation's completion until then, so the caller may reuse or free its buffer afterwards.
  virtual bool user_memory_released() { return true; }
  // True when send(…, UserMemory) reads any memory in place, registered or not (tcp: sendmsg
  // copies straight from it into the socket): a caller that keeps a buffer unchanged until
  // flushed() may pass UserMemory{buffer, bytes} for it without registering it.
  virtual bool sends_any_memory_in_place() const { return false; }
  // Makes queued sends stop reading the callers' memory in place (tcp copies what is still
  // queued), so a caller whose collective failed may take its buffers back at once, though the
  // sends leave later or never. Drivers whose NIC reads the memory cannot; they do nothing.
  virtual void stop_reading_user_memory() {}
  // Progresses sends and returns up to `max` received messages (0 if none), or -1 on error
  // (a peer died or closed, a corrupt frame): error() says which peer and why.
  virtual int poll(ReceivedMessage* out, int max) = 0;
  // True when every queued send has left this process (teardown waits for it).
  virtual bool flushed() = 0;
  // Event mode (SPARCOLL_POLL_MODE=event): a descriptor that becomes readable when poll() may
  // have something new, or -1 when the driver has none (the engine then keeps polling). Before
  // sleeping on it the engine calls arm() and then poll() once more, so nothing that arrived
  // in between is missed.
  virtual int wait_fd() { return -1; }
  virtual void arm() {}
  virtual const Status& error() const = 0;
  // This channel's own counters (see ChannelCounters); none by default.
  virtual ChannelCounters counters() const { return {}; }
  // True when this channel can read every peer's memory in place (read_peer_memory): the shm
  // driver's peers are processes of this host, whose memory process_vm_readv copies from (after
  // a check at setup that every peer allowed it). The same on every process of a job.
  virtual bool reads_peer_memory() const { return false; }
  // True when a peer's send to this channel ends only once this channel's poll() acknowledged
  // it (a driver that resends lost frames: dpdk). A thread that owns such a channel keeps
  // polling it while it waits for something else; other channels' peers need nothing from a
  // channel that is not polled until its next use.
  virtual bool acknowledges_when_polled() const { return false; }
  // Whether threads may take turns on this channel (one at a time, handing over through an
  // acquire/release pair). False where the driver keeps per-thread state (dpdk's lcore caches).
  virtual bool any_thread() const { return true; }
  // Copies `bytes` at address `remote` in `peer`'s address space to `local`: one copy, no message.
  // Errors (the peer is gone, the address is not mapped there) name the peer.
  virtual Status read_peer_memory(std::uint32_t peer, std::uint64_t remote, void* local, std::size_t bytes) {
    (void)peer, (void)remote, (void)local, (void)bytes;
    return Status(ErrorCode::unsupported, "this transport cannot read a peer's memory");
  }
};

// Who a process is; every process publishes it when it joins the job.
struct ProcessInfo {
  std::uint32_t index = 0;   // process index: workers 0..W-1, dedicated aggregators W..W+M-1
  std::string name;          // "rank 2" or "aggregator 0" (for messages)
  std::int64_t pid = 0;
  std::string host;          // host identity (hostname + boot id) for locality checks
  std::string address;       // IP address peers use to reach this process
};

struct DriverContext {
  const Options* options = nullptr;
  SetupExchange* exchange = nullptr;    // for telling peers where to reach this process
  std::string job_id;                   // unique to this job (names host-local resources: shm segments)
  std::uint32_t self = 0;               // my process index
  std::vector<ProcessInfo> processes;   // every process in the job, by index
  std::vector<std::uint32_t> peers;     // the processes I exchange messages with (never self)
  std::uint32_t channels = 1;           // progress threads per process (options->threads)
  std::uint32_t max_message = 0;        // requested message size limit (options->max_message)
  std::uint32_t deadline_ms = 30000;    // for connection setup
};

class Driver {
 public:
  virtual ~Driver() = default;
  virtual std::string_view name() const = 0;
  virtual Channel& channel(std::uint32_t index) = 0;
  // Makes [addr, addr + len) readable in place by send(…, UserMemory) on every channel, e.g. by
  // registering it with the NIC (cached: the same buffer costs one registration). False when the
  // driver has no zero-copy path or registration failed (then sends copy; the driver logs why
  // once). Thread-safe; called when the application registers a buffer, never per message.
  virtual bool register_memory(const void* addr, std::size_t len, UserMemory* out) {
    (void)addr, (void)len, (void)out;
    return false;
  }
  // Forgets a buffer given to register_memory (its memory is about to be freed). Only call
  // when no operation using it is in flight.
  virtual void forget_memory(const void* addr, std::size_t len) { (void)addr, (void)len; }
};

// Creates driver `name` ("shm", "tcp", ...) and connects it to every peer in ctx.peers.
// Returns after all connections are up, or with an error naming the peer that failed.
Status create_driver(std::string_view name, const DriverContext& ctx, std::unique_ptr<Driver>* out);
// Names of the drivers built into this library.
std::vector<std::string> available_drivers();
// Whether driver `name` can run on this machine now (rdma needs a device with an active port).
// False with `reason` set when it cannot, or when it is not built. Tests skip on false.
bool driver_usable(std::string_view name, std::string* reason);

}  // namespace sparcoll::transport
