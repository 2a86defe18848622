#include "tcp_channel.hpp"

#include <endian.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "tcp_wire.hpp"
#include "transport/setup_util.hpp"

namespace sparcoll::transport::tcp {
namespace {

// Read-ahead: with small messages one recv() brings in many frames.
constexpr std::size_t kMinReceiveBuffer = 256 * 1024;
// Sized for a bandwidth-delay product well above loopback's; larger messages get two frames' worth.
constexpr std::size_t kMinSendQueue = 2 * 1024 * 1024;
constexpr int kMaxEventsPerPoll = 64;
// iovec entries of a frame written straight from the caller's buffers (IOV_MAX is 1024); a
// message gathered from more is queued whole.
constexpr std::size_t kMaxWriteThroughEntries = 256;
// Segments a peer's send queue holds (copied runs and references; a frame takes up to its
// entries + 2): enough for the queue of copied frames, or 256 frames' payloads by reference.
constexpr std::size_t kQueueSegments = 1024;
// iovec entries per sendmsg of a queue: 32 frames of header and payload by reference.
constexpr int kFlushEntries = 64;

std::size_t next_power_of_two(std::size_t n) {
  std::size_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

}  // namespace

TcpChannel::TcpChannel(std::uint32_t index, std::uint32_t max_message, std::size_t process_count)
    : index_(index), max_message_(max_message), slot_of_(process_count, -1) {
  max_frame_ = static_cast<std::size_t>(frame_bytes(max_message));
  rx_capacity_ = std::max(2 * max_frame_, kMinReceiveBuffer);
  frame_iov_.reserve(kMaxWriteThroughEntries);
}

Status TcpChannel::create(std::uint32_t index, std::uint32_t max_message, std::size_t process_count,
                          std::vector<PeerConnection> peers, std::unique_ptr<TcpChannel>* out) {
  std::unique_ptr<TcpChannel> channel(new TcpChannel(index, max_message, process_count));
  const std::size_t queue_bytes = next_power_of_two(std::max(2 * channel->max_frame_, kMinSendQueue));
  channel->peers_.resize(peers.size());
  for (std::size_t i = 0; i < peers.size(); ++i) {
    Peer& peer = channel->peers_[i];
    peer.index = peers[i].index;
    peer.label = std::move(peers[i].label);
    peer.fd = peers[i].fd;  // owned (and closed) by the channel from here on, even on error
    peer.queue = SendQueue(queue_bytes, kQueueSegments);
    peer.rx.reset(new std::byte[channel->rx_capacity_]);  // operator new[]: 16-byte aligned
    channel->slot_of_[peer.index] = static_cast<std::int32_t>(i);
  }
  channel->epoll_ = epoll_create1(EPOLL_CLOEXEC);
  if (channel->epoll_ < 0)
    return Status(ErrorCode::system_error, "epoll_create1 for tcp channel " + std::to_string(index) + " failed: " + errno_text(errno));
  for (std::size_t i = 0; i < channel->peers_.size(); ++i) {
    epoll_event event{};
    event.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
    event.data.u32 = static_cast<std::uint32_t>(i);
    if (epoll_ctl(channel->epoll_, EPOLL_CTL_ADD, channel->peers_[i].fd, &event) != 0)
      return Status(ErrorCode::system_error, "epoll_ctl for " + channel->peers_[i].label + " on tcp channel " +
                                                 std::to_string(index) + " failed: " + errno_text(errno));
  }
  *out = std::move(channel);
  return Status::Ok();
}

TcpChannel::~TcpChannel() {
  for (Peer& peer : peers_)
    if (peer.fd >= 0) close(peer.fd);
  if (epoll_ >= 0) close(epoll_);
}

SendResult TcpChannel::send(std::uint32_t peer, const struct iovec* iov, int iovcnt) {
  return send_frame(peer, iov, iovcnt, nullptr);
}

SendResult TcpChannel::send(std::uint32_t peer, const struct iovec* iov, int iovcnt, const UserMemory& user) {
  return send_frame(peer, iov, iovcnt, &user);
}

SendResult TcpChannel::send_frame(std::uint32_t peer, const struct iovec* iov, int iovcnt, const UserMemory* user) {
  if (!error_.ok()) return SendResult::error;
  if (peer >= slot_of_.size() || slot_of_[peer] < 0) {
    error_ = Status(ErrorCode::invalid_argument, "send to process " + std::to_string(peer) +
                                                     ", which is not a peer of tcp channel " + std::to_string(index_));
    return SendResult::error;
  }
  Peer& target = peers_[static_cast<std::size_t>(slot_of_[peer])];
  std::uint64_t len = 0;
  for (int i = 0; i < iovcnt; ++i) len += iov[i].iov_len;
  if (len > max_message_) {
    error_ = Status(ErrorCode::invalid_argument, "message of " + std::to_string(len) + " bytes to " + target.label +
                                                     " exceeds the max message of " + std::to_string(max_message_) +
                                                     " bytes on tcp channel " + std::to_string(index_));
    return SendResult::error;
  }
  const std::uint64_t bytes = frame_bytes(len);
  // The entries queued by reference if they do not go out now; the others are copied.
  std::uint64_t referenced = 0;
  for (int i = 0; i < iovcnt; ++i)
    if (by_reference(iov[i], user)) referenced += iov[i].iov_len;
  if (!target.queue.can_take(bytes - referenced, static_cast<std::size_t>(iovcnt) + 2)) return SendResult::no_resource;
  const FrameHeader header{htole32(static_cast<std::uint32_t>(len)), 0};
  static constexpr std::byte kZeros[8] = {};
  const std::size_t padding = bytes - sizeof header - len;
  // The first frame to a peer since the last poll, with nothing queued ahead and room in the
  // socket, goes out now, straight from the caller's buffers; what the socket does not take is
  // queued. The frames after it in the same burst are queued and leave together at the next
  // poll: one sendmsg per frame made a 16 MiB ring 13% slower and the block-sparse engine's
  // stream of small windows up to 75% slower, while waiting for the poll made an exchange of
  // single frames (a 64 KiB ring or recursive doubling) take 46 us instead of 20-24.
  const bool first_of_burst = !target.sent_since_poll;
  target.sent_since_poll = true;
  if (first_of_burst && target.queue.empty() && target.writable && target.write_errno == 0 &&
      static_cast<std::size_t>(iovcnt) + 2 <= frame_iov_.capacity()) {
    frame_iov_.clear();
    frame_iov_.push_back({const_cast<FrameHeader*>(&header), sizeof header});
    for (int i = 0; i < iovcnt; ++i)
      if (iov[i].iov_len != 0) frame_iov_.push_back(iov[i]);
    if (padding != 0) frame_iov_.push_back({const_cast<std::byte*>(kZeros), padding});
    std::size_t skip = write_through(target, frame_iov_.data(), static_cast<int>(frame_iov_.size()), bytes);
    for (const struct iovec& part : frame_iov_) {
      if (skip >= part.iov_len) {
        skip -= part.iov_len;
        continue;
      }
      const struct iovec rest = {static_cast<std::byte*>(part.iov_base) + skip, part.iov_len - skip};
      queue_part(target, rest, by_reference(part, user));
      skip = 0;
    }
    return SendResult::ok;
  }
  target.queue.push(&header, sizeof header);
  for (int i = 0; i < iovcnt; ++i) queue_part(target, iov[i], by_reference(iov[i], user));
  target.queue.push(kZeros, padding);
  return SendResult::ok;
}

bool TcpChannel::by_reference(const struct iovec& part, const UserMemory* user) {
  if (user == nullptr || part.iov_len < kMinReference) return false;
  const auto* begin = static_cast<const std::byte*>(part.iov_base);
  return begin >= user->base && begin + part.iov_len <= user->base + user->len;
}

void TcpChannel::queue_part(Peer& peer, const struct iovec& part, bool reference) {
  if (reference)
    peer.queue.push_reference(part.iov_base, part.iov_len);
  else
    peer.queue.push(part.iov_base, part.iov_len);
}

std::size_t TcpChannel::write_through(Peer& peer, const struct iovec* frame, int count, std::size_t bytes) {
  msghdr message{};
  message.msg_iov = const_cast<struct iovec*>(frame);
  message.msg_iovlen = static_cast<std::size_t>(count);
  for (;;) {
    const ssize_t sent = sendmsg(peer.fd, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent >= 0) {
      if (static_cast<std::size_t>(sent) < bytes) peer.writable = false;  // socket buffer full: EPOLLOUT follows
      return static_cast<std::size_t>(sent);
    }
    if (errno == EINTR) continue;
    // As in flush: EPIPE, ECONNRESET mean the peer is gone, and its last frames are still read.
    if (errno != EAGAIN && errno != EWOULDBLOCK) peer.write_errno = errno;
    peer.writable = false;
    return 0;
  }
}

int TcpChannel::poll(ReceivedMessage* out, int max) {
  if (!error_.ok()) return -1;
  // Messages handed out by the previous poll are released: compact only when the free tail
  // could not take a whole frame, so the common case moves nothing.
  for (Peer& peer : peers_) {
    if (peer.rx_start == peer.rx_end) {
      peer.rx_start = peer.rx_end = 0;
    } else if (peer.rx_start > 0 && rx_capacity_ - peer.rx_end < max_frame_) {
      std::memmove(peer.rx.get(), peer.rx.get() + peer.rx_start, peer.rx_end - peer.rx_start);
      peer.rx_end -= peer.rx_start;
      peer.rx_start = 0;
    }
  }
  wait_events();
  for (Peer& peer : peers_) {
    peer.sent_since_poll = false;
    if (peer.writable && peer.write_errno == 0 && !peer.queue.empty()) flush(peer);
  }

  int n = 0;
  const std::size_t count = peers_.size();
  for (std::size_t k = 0; k < count && n < max; ++k) {
    std::size_t slot = next_first_ + k;
    if (slot >= count) slot -= count;
    Peer& peer = peers_[slot];
    // After a corrupt frame, the frames before it are still handed out; the error shows at the
    // next poll (as when a peer closes).
    n = deliver(peer, out, n, max);
    if (!error_.ok()) return n > 0 ? n : -1;
    if (n < max && peer.readable && !peer.closed && peer.read_errno == 0) {
      receive(peer);
      n = deliver(peer, out, n, max);
      if (!error_.ok()) return n > 0 ? n : -1;
    }
  }
  if (++next_first_ >= count) next_first_ = 0;

  for (Peer& peer : peers_) {
    if (!failed(peer)) continue;
    check_closed(peer);
    if (!error_.ok()) return n > 0 ? n : -1;  // the error shows at the next poll
  }
  return n;
}

bool TcpChannel::flushed() {
  if (!error_.ok()) return true;  // nothing queued will ever leave: teardown must not wait for it
  // Asked every round while a step's receives are pending, and the sends usually went out
  // whole when they were made: an epoll_wait then learns nothing poll() will not, and on a
  // core shared by ranks each round's extra system call delays the rank whose data has come.
  bool any_queued = false;
  for (const Peer& peer : peers_) any_queued = any_queued || !peer.queue.empty();
  if (!any_queued) return true;
  wait_events();
  bool all_empty = true;
  for (Peer& peer : peers_) {
    if (peer.writable && peer.write_errno == 0 && !peer.queue.empty()) flush(peer);
    // A peer that is gone will never take its queue: that must not hold teardown up.
    const bool gone = peer.closed || peer.read_errno != 0 || peer.write_errno != 0;
    if (gone) peer.queue.clear();  // and nothing of a caller's memory is read after this returns
    all_empty = all_empty && peer.queue.empty();
  }
  return all_empty;
}

bool TcpChannel::user_memory_released() {
  if (!error_.ok()) return true;  // nothing queued is written after an error
  for (const Peer& peer : peers_)
    if (peer.queue.holds_references()) return flushed();
  return true;
}

void TcpChannel::wait_events() {
  epoll_event events[kMaxEventsPerPoll];
  const int n = epoll_wait(epoll_, events, kMaxEventsPerPoll, 0);
  for (int i = 0; i < n; ++i) {
    Peer& peer = peers_[events[i].data.u32];
    const std::uint32_t ev = events[i].events;
    if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) peer.readable = true;
    if (ev & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) peer.hangup = true;
    if (ev & (EPOLLOUT | EPOLLHUP | EPOLLERR)) peer.writable = true;
  }
}

void TcpChannel::flush(Peer& peer) {
  while (!peer.queue.empty()) {
    struct iovec iov[kFlushEntries];
    msghdr message{};
    message.msg_iov = iov;
    message.msg_iovlen = static_cast<std::size_t>(peer.queue.readable(iov, kFlushEntries));
    std::size_t wanted = 0;
    for (std::size_t i = 0; i < message.msg_iovlen; ++i) wanted += iov[i].iov_len;
    const ssize_t sent = sendmsg(peer.fd, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent >= 0) {
      peer.queue.consume(static_cast<std::size_t>(sent));
      if (static_cast<std::size_t>(sent) < wanted) break;  // socket buffer full: wait for EPOLLOUT
      continue;
    }
    if (errno == EINTR) continue;
    // EPIPE, ECONNRESET: the peer is gone. Keep reading: its last frames come first, and
    // recv() then reports how the connection ended.
    if (errno != EAGAIN && errno != EWOULDBLOCK) peer.write_errno = errno;
    break;
  }
  if (!peer.queue.empty()) peer.writable = false;
}

void TcpChannel::receive(Peer& peer) {
  const std::size_t room = rx_capacity_ - peer.rx_end;
  if (room == 0) return;  // full of frames not yet handed out; stays readable
  for (;;) {
    const ssize_t got = recv(peer.fd, peer.rx.get() + peer.rx_end, room, MSG_DONTWAIT);
    if (got > 0) {
      peer.rx_end += static_cast<std::size_t>(got);
      // A short read drained the socket and the next arrival raises a new edge, but a hang-up
      // already seen raises none: keep reading until recv() reports it.
      if (static_cast<std::size_t>(got) < room && !peer.hangup) peer.readable = false;
      return;
    }
    if (got == 0) {
      peer.closed = true;
    } else if (errno == EINTR) {
      continue;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      peer.readable = false;
    } else {
      peer.read_errno = errno;
    }
    return;
  }
}

int TcpChannel::deliver(Peer& peer, ReceivedMessage* out, int n, int max) {
  while (n < max) {
    std::uint32_t len = 0;
    const FrameCheck check = check_frame(peer.rx.get() + peer.rx_start, peer.rx_end - peer.rx_start, max_message_, &len);
    if (check == FrameCheck::incomplete) break;
    if (check == FrameCheck::bad_reserved) {
      error_ = Status(ErrorCode::protocol_error, "malformed frame header from " + peer.label + " on tcp channel " +
                                                     std::to_string(index_));
      break;
    }
    if (check == FrameCheck::too_large) {
      error_ = Status(ErrorCode::protocol_error, peer.label + " sent a frame of " + std::to_string(len) +
                                                     " bytes on tcp channel " + std::to_string(index_) +
                                                     ", above the max message of " + std::to_string(max_message_) + " bytes");
      break;
    }
    out[n++] = ReceivedMessage{peer.index, peer.rx.get() + peer.rx_start + sizeof(FrameHeader), len};
    peer.rx_start += static_cast<std::size_t>(frame_bytes(len));
  }
  return n;
}

void TcpChannel::check_closed(Peer& peer) {
  const std::size_t left = peer.rx_end - peer.rx_start;
  if (left >= sizeof(FrameHeader)) {
    FrameHeader header;
    std::memcpy(&header, peer.rx.get() + peer.rx_start, sizeof header);
    if (left >= frame_bytes(le32toh(header.len))) return;  // a whole frame is still to be delivered
  }
  const std::string where = " on tcp channel " + std::to_string(index_);
  if (peer.closed) {
    error_ = Status(ErrorCode::peer_failure, peer.label + " closed the connection" + where +
                                                 (left > 0 ? " in the middle of a message" : ""));
  } else {
    const int err = peer.read_errno != 0 ? peer.read_errno : peer.write_errno;
    if (err == ECONNRESET || err == EPIPE)
      error_ = Status(ErrorCode::peer_failure, peer.label + " reset the connection" + where);
    else
      error_ = Status(ErrorCode::peer_failure, "connection to " + peer.label + where + " failed: " + errno_text(err));
  }
}

}  // namespace sparcoll::transport::tcp
