// One tcp channel: a connection to each peer, one epoll, edge-triggered.
//
// send() writes the first frame of a burst straight from the caller's buffers when nothing is
// queued ahead of it, and queues the rest in the peer's SendQueue: copied, or by reference for
// send(…, UserMemory), which takes any memory (no registration). poll():
//   1. compacts receive buffers (messages handed out last time are released now),
//   2. writes queued frames of writable peers (one sendmsg each),
//   3. hands out complete frames already buffered,
//   4. epoll_wait(0) once, recv()s into each readable peer's buffer, hands out new frames,
//   5. reports a peer that closed or reset its connection once its last frames are delivered.
// The receive buffer holds at least two max frames, so a partial frame always has room.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tcp_send_queue.hpp"
#include "transport/driver.hpp"

namespace sparcoll::transport::tcp {

struct PeerConnection {
  std::uint32_t index = 0;  // process index
  std::string label;        // "rank 2 (127.0.0.1:40123)"
  int fd = -1;              // owned by the channel from here on
};

class TcpChannel final : public Channel {
 public:
  // Creates the epoll set and buffers; fails only on a system error.
  static Status create(std::uint32_t index, std::uint32_t max_message, std::size_t process_count,
                       std::vector<PeerConnection> peers, std::unique_ptr<TcpChannel>* out);
  ~TcpChannel() override;

  std::uint32_t max_message() const override { return max_message_; }
  SendResult send(std::uint32_t peer, const struct iovec* iov, int iovcnt) override;
  SendResult send(std::uint32_t peer, const struct iovec* iov, int iovcnt, const UserMemory& user) override;
  bool user_memory_released() override;
  bool sends_any_memory_in_place() const override { return true; }
  void stop_reading_user_memory() override {
    for (Peer& peer : peers_) peer.queue.own_references();
  }
  int poll(ReceivedMessage* out, int max) override;
  bool flushed() override;
  const Status& error() const override { return error_; }

 private:
  struct Peer {
    std::uint32_t index = 0;
    std::string label;
    int fd = -1;
    SendQueue queue;
    bool writable = true;   // edge-triggered: false after EAGAIN until EPOLLOUT
    bool sent_since_poll = false;  // a frame went to this peer since the last poll (send())
    bool readable = true;   // edge-triggered: false after a short read until EPOLLIN
    bool hangup = false;    // EPOLLRDHUP/HUP/ERR seen: read until recv reports it, edges are over
    bool closed = false;    // recv returned 0
    int read_errno = 0;     // recv failed (ECONNRESET...)
    int write_errno = 0;    // sendmsg failed (EPIPE...): reported once nothing is left to read
    std::unique_ptr<std::byte[]> rx;
    std::size_t rx_start = 0;  // first byte not handed out
    std::size_t rx_end = 0;    // end of received bytes
  };

  TcpChannel(std::uint32_t index, std::uint32_t max_message, std::size_t process_count);
  void wait_events();                       // epoll_wait(0), sets writable/readable

 public:
  // The epoll set is readable whenever a socket has news: event mode sleeps on it.
  int wait_fd() override { return epoll_; }

 private:
  // Entries of at least this many bytes inside the caller's UserMemory are queued by reference;
  // a smaller one costs more as an iovec of its own than as a copy.
  static constexpr std::size_t kMinReference = 4096;
  SendResult send_frame(std::uint32_t peer, const struct iovec* iov, int iovcnt, const UserMemory* user);
  static bool by_reference(const struct iovec& part, const UserMemory* user);
  static void queue_part(Peer& peer, const struct iovec& part, bool reference);
  void flush(Peer& peer);                   // sendmsg of queued bytes
  // sendmsg of a frame straight from the caller's iovec when nothing is queued ahead of it;
  // returns the bytes the socket took (the caller queues the rest).
  std::size_t write_through(Peer& peer, const struct iovec* frame, int count, std::size_t bytes);
  void receive(Peer& peer);                 // one recv into the free end of rx
  // Complete frames -> out[n..max); returns the new n. A corrupt frame stops it and sets error_.
  int deliver(Peer& peer, ReceivedMessage* out, int n, int max);
  static bool failed(const Peer& peer) {
    return peer.closed || peer.read_errno != 0 || (peer.write_errno != 0 && !peer.readable);
  }
  void check_closed(Peer& peer);            // peer_failure once a failed peer is drained

  std::uint32_t index_;
  std::uint32_t max_message_;
  std::size_t rx_capacity_ = 0;
  std::size_t max_frame_ = 0;
  int epoll_ = -1;
  std::vector<Peer> peers_;
  std::vector<std::int32_t> slot_of_;  // process index -> position in peers_, -1 if not a peer
  std::size_t next_first_ = 0;         // round-robin start of delivery
  std::vector<struct iovec> frame_iov_;  // header, the caller's entries, padding (capacity kept)
  Status error_;
};

}  // namespace sparcoll::transport::tcp
