// One shm channel: a ring pair with each peer (we write into the peer's segment, read from ours).
// send() is a copy into the peer's ring; poll() hands out messages in place and releases
// their space at the next poll. No syscall, lock or allocation on either path, except the
// rate-limited pidfd poll (shm_liveness.hpp).
#pragma once

#include <poll.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "shm_liveness.hpp"
#include "shm_ring.hpp"
#include "transport/driver.hpp"

namespace sparcoll::transport::shm {

// Everything a channel needs about one peer; built by the driver at setup.
struct PeerLink {
  std::uint32_t index = 0;
  std::string label;                                // "rank 2 (pid 4242)", for errors
  RingWriter out;                                   // our ring inside the peer's segment
  RingReader in;                                    // the peer's ring inside our segment
  const std::atomic<std::uint32_t>* closed = nullptr;  // the peer's closed flag
  int pidfd = -1;                                   // -1: not watched by pidfd
  std::int64_t kill_pid = 0;                        // > 0: watched with kill(pid, 0) instead
  std::int64_t pid = 0;                             // for read_peer_memory
};

class ShmChannel final : public Channel {
 public:
  // reads_peer_memory: every process of the job passed the driver's setup check (shm_driver.cpp).
  ShmChannel(std::uint32_t index, std::uint32_t max_message, std::size_t process_count, std::vector<PeerLink> peers,
             bool reads_peer_memory = false);

  std::uint32_t max_message() const override { return max_message_; }
  SendResult send(std::uint32_t peer, const struct iovec* iov, int iovcnt) override;
  int poll(ReceivedMessage* out, int max) override;
  // A message is in the peer's ring the moment send() returns ok.
  bool flushed() override { return true; }
  const Status& error() const override { return error_; }
  bool reads_peer_memory() const override { return reads_peer_memory_; }
  Status read_peer_memory(std::uint32_t peer, std::uint64_t remote, void* local, std::size_t bytes) override;

 private:
  struct Peer : PeerLink {
    const char* gone_reason = nullptr;  // set once the peer is known to be gone
  };

  // Marks peers whose closed flag is set or whose process exited.
  void check_liveness();
  // peer_failure for the first gone peer whose ring we have fully drained (its last messages
  // are delivered first); false if there is none yet.
  bool fail_drained_gone_peer();

  std::uint32_t index_;
  std::uint32_t max_message_;
  std::vector<Peer> peers_;
  std::vector<std::int32_t> slot_of_;   // process index -> position in peers_, -1 if not a peer
  std::vector<struct pollfd> pidfds_;   // one per peer, fd -1 when not watched
  bool any_pidfd_ = false;
  bool any_gone_ = false;
  std::size_t next_first_ = 0;          // round-robin start, so no peer starves the others
  LivenessClock liveness_clock_;
  bool reads_peer_memory_ = false;
  Status error_;
};

}  // namespace sparcoll::transport::shm
