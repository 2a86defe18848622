#include "shm_channel.hpp"

#include <signal.h>

#include <cerrno>

namespace sparcoll::transport::shm {

ShmChannel::ShmChannel(std::uint32_t index, std::uint32_t max_message, std::size_t process_count,
                       std::vector<PeerLink> peers, bool reads_peer_memory)
    : index_(index), max_message_(max_message), slot_of_(process_count, -1), reads_peer_memory_(reads_peer_memory) {
  peers_.reserve(peers.size());
  for (PeerLink& link : peers) {
    slot_of_[link.index] = static_cast<std::int32_t>(peers_.size());
    pidfds_.push_back(pollfd{link.pidfd, POLLIN, 0});
    any_pidfd_ = any_pidfd_ || link.pidfd >= 0;
    Peer peer;
    static_cast<PeerLink&>(peer) = std::move(link);
    peers_.push_back(std::move(peer));
  }
}

SendResult ShmChannel::send(std::uint32_t peer, const struct iovec* iov, int iovcnt) {
  if (!error_.ok()) return SendResult::error;
  if (peer >= slot_of_.size() || slot_of_[peer] < 0) {
    error_ = Status(ErrorCode::invalid_argument, "send to process " + std::to_string(peer) +
                                                     ", which is not a peer of shm channel " + std::to_string(index_));
    return SendResult::error;
  }
  std::uint64_t len = 0;
  for (int i = 0; i < iovcnt; ++i) len += iov[i].iov_len;
  Peer& target = peers_[static_cast<std::size_t>(slot_of_[peer])];
  if (len > max_message_) {
    error_ = Status(ErrorCode::invalid_argument, "message of " + std::to_string(len) + " bytes to " + target.label +
                                                     " exceeds the max message of " + std::to_string(max_message_) +
                                                     " bytes on shm channel " + std::to_string(index_));
    return SendResult::error;
  }
  return target.out.try_write(iov, iovcnt, static_cast<std::uint32_t>(len)) ? SendResult::ok : SendResult::no_resource;
}

int ShmChannel::poll(ReceivedMessage* out, int max) {
  if (!error_.ok()) return -1;
  // Messages handed out by the previous poll are no longer in use: give their space back.
  for (Peer& peer : peers_) peer.in.release();

  int n = 0;
  const std::size_t count = peers_.size();
  for (std::size_t k = 0; k < count && n < max; ++k) {
    std::size_t slot = next_first_ + k;
    if (slot >= count) slot -= count;
    Peer& peer = peers_[slot];
    while (n < max) {
      const std::byte* data = nullptr;
      std::uint32_t len = 0;
      const RingReader::Next next = peer.in.next(&data, &len);
      if (next == RingReader::Next::empty) break;
      if (next == RingReader::Next::corrupt) {
        error_ = Status(ErrorCode::protocol_error, "corrupt record in the shm ring from " + peer.label + " on channel " +
                                                       std::to_string(index_));
        // The messages before it are handed out; the error shows at the next poll.
        return n > 0 ? n : -1;
      }
      out[n++] = ReceivedMessage{peer.index, data, len};
    }
  }
  if (++next_first_ >= count) next_first_ = 0;

  if (liveness_clock_.due()) check_liveness();
  if (any_gone_ && fail_drained_gone_peer()) return n > 0 ? n : -1;  // the error shows at the next poll
  return n;
}

void ShmChannel::check_liveness() {
  if (any_pidfd_) {
    // One syscall for every peer process, at most every LivenessClock::kCheckIntervalNs.
    if (::poll(pidfds_.data(), pidfds_.size(), 0) < 0) return;  // EINTR/ENOMEM: try again next time
  }
  for (std::size_t i = 0; i < peers_.size(); ++i) {
    Peer& peer = peers_[i];
    if (peer.gone_reason != nullptr) continue;
    if (peer.closed->load(std::memory_order_acquire) != 0) {
      peer.gone_reason = "closed its shm transport";
    } else if (process_exited(pidfds_[i])) {
      peer.gone_reason = "exited";
    } else if (peer.kill_pid > 0 && kill(static_cast<pid_t>(peer.kill_pid), 0) != 0 && errno == ESRCH) {
      peer.gone_reason = "exited";
    } else {
      continue;
    }
    any_gone_ = true;
  }
}

bool ShmChannel::fail_drained_gone_peer() {
  for (Peer& peer : peers_) {
    // drained() loads tail after the closed flag or the exit was seen, so every message the
    // peer published before going is delivered before we report it.
    if (peer.gone_reason == nullptr || !peer.in.drained()) continue;
    error_ = Status(ErrorCode::peer_failure, peer.label + " " + peer.gone_reason + " (seen on shm channel " +
                                                 std::to_string(index_) + ")");
    return true;
  }
  return false;
}

}  // namespace sparcoll::transport::shm
