#include "p2p/mailbox.hpp"

#include <sys/uio.h>

#include <algorithm>
#include <cstring>

namespace sparcoll::p2p {

Mailbox::Mailbox(std::uint32_t rank, std::uint32_t size) : rank_(rank), size_(size), next_seq_(size, 0) {}

void Mailbox::complete(detail::RequestState& request, const Status& status) { detail::complete(request, status); }

Status Mailbox::size_mismatch(const Recv& r, std::uint32_t from, std::uint64_t total) {
  return Status(ErrorCode::mismatch, "recv with tag " + std::to_string(r.tag) + ": rank " + std::to_string(from) +
                                         " sent " + std::to_string(total) + " bytes, this rank receives " +
                                         std::to_string(r.bytes) + " (the sizes differ)");
}

void Mailbox::post_send(std::uint32_t peer, std::uint32_t tag, const void* data, std::size_t bytes,
                        std::shared_ptr<detail::RequestState> request, Clock::time_point deadline) {
  sends_.push_back(Send{peer, tag, next_seq_[peer]++, static_cast<const std::byte*>(data), bytes, 0, false,
                        std::move(request), deadline});
}

void Mailbox::post_recv(std::int32_t peer, std::uint32_t tag, void* data, std::size_t bytes, std::int32_t* source,
                        std::shared_ptr<detail::RequestState> request, Clock::time_point deadline) {
  Recv r{peer, tag, static_cast<std::byte*>(data), bytes, source, std::move(request), deadline};
  // The first message that came for it (in arrival order, so each sender's in sending order).
  for (std::size_t i = 0; i < incoming_.size(); ++i) {
    Incoming& m = incoming_[i];
    if (m.bound || m.discard || !matches(r, m.from, m.tag)) continue;
    if (m.total != r.bytes) {
      complete(*r.request, size_mismatch(r, m.from, m.total));
      if (m.received == m.total) {
        incoming_.erase(incoming_.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        m.discard = true;  // the rest of it is dropped as it comes
        std::vector<std::byte>().swap(m.data);
      }
      return;
    }
    take(m, std::move(r));
    if (m.received == m.total) {
      if (m.recv.source) *m.recv.source = static_cast<std::int32_t>(m.from);
      complete(*m.recv.request, Status());
      incoming_.erase(incoming_.begin() + static_cast<std::ptrdiff_t>(i));
    }
    return;
  }
  recvs_.push_back(std::move(r));
}

void Mailbox::take(Incoming& m, Recv r) {
  if (m.received != 0) std::memcpy(r.dst, m.data.data(), m.received);
  std::vector<std::byte>().swap(m.data);
  m.bound = true;
  m.recv = std::move(r);
}

bool Mailbox::progress(transport::Channel& channel) {
  bool moved = false;
  for (std::size_t i = 0; i < sends_.size();) {
    Send& s = sends_[i];
    // One message at a time per destination: a later one never starts before an earlier one
    // has gone whole, so the receiver sees each sender's messages in order.
    bool earlier_pending = false;
    for (std::size_t j = 0; j < i && !earlier_pending; ++j) earlier_pending = sends_[j].peer == s.peer;
    if (earlier_pending) {
      ++i;
      continue;
    }
    const std::size_t payload = (channel.max_message() - sizeof(PeerHeader)) / 8 * 8;
    bool refused = false;
    while (s.offset < s.bytes || !s.started) {
      const std::size_t len = std::min(payload, s.bytes - s.offset);
      PeerHeader h{kPeerMagic, kPeerVersion, static_cast<std::uint8_t>(PeerKind::p2p), 0, 0, 0, s.seq, s.tag, s.bytes,
                   s.offset};
      struct iovec iov[2] = {{&h, sizeof h}, {const_cast<std::byte*>(s.data + s.offset), len}};
      const transport::SendResult r = channel.send(s.peer, iov, len ? 2 : 1);
      if (r == transport::SendResult::no_resource) {
        refused = true;
        break;
      }
      if (r == transport::SendResult::error) {
        fail_all(Status(ErrorCode::peer_failure, "send to rank " + std::to_string(s.peer) + " with tag " +
                                                     std::to_string(s.tag) + " failed: " + channel.error().message()));
        return true;
      }
      s.started = true;
      s.offset += len;
      bytes_sent_ += sizeof h + len;
      ++messages_sent_;
      moved = true;
    }
    if (refused) {
      ++i;
      continue;
    }
    complete(*s.request, Status());  // the channel has the bytes: the caller's buffer is free again
    sends_.erase(sends_.begin() + static_cast<std::ptrdiff_t>(i));
  }
  return moved;
}

void Mailbox::on_fragment(std::uint32_t from, const PeerHeader& h, const std::byte* payload, std::size_t len) {
  bytes_received_ += sizeof(PeerHeader) + len;
  ++messages_received_;
  std::size_t at = incoming_.size();
  for (std::size_t i = 0; i < incoming_.size(); ++i)
    if (incoming_[i].from == from && incoming_[i].seq == h.seq) at = i;
  if (at == incoming_.size()) {
    if (h.offset != 0) return;  // the rest of a message whose receive expired: dropped
    Incoming m{from, h.seq, h.tag, h.total, 0, {}, false, false, {}};
    std::size_t match = recvs_.size();
    for (std::size_t k = 0; k < recvs_.size() && match == recvs_.size(); ++k)
      if (matches(recvs_[k], from, h.tag)) match = k;
    if (match != recvs_.size()) {
      Recv r = std::move(recvs_[match]);
      recvs_.erase(recvs_.begin() + static_cast<std::ptrdiff_t>(match));
      if (h.total != r.bytes) {
        complete(*r.request, size_mismatch(r, from, h.total));
        m.discard = true;
      } else {
        m.bound = true;
        m.recv = std::move(r);
      }
    } else {
      m.data.resize(h.total);  // kept whole until a receive takes it
    }
    incoming_.push_back(std::move(m));
  }
  Incoming& m = incoming_[at];
  if (h.offset != m.received || h.total != m.total) {
    // Out of order or another size midway: a broken sender. Its receive fails; the rest is dropped.
    if (m.bound)
      complete(*m.recv.request, Status(ErrorCode::protocol_error, "recv with tag " + std::to_string(m.tag) + ": rank " +
                                                                      std::to_string(from) + " sent bytes out of order"));
    incoming_.erase(incoming_.begin() + static_cast<std::ptrdiff_t>(at));
    return;
  }
  if (len != 0 && !m.discard) std::memcpy((m.bound ? m.recv.dst : m.data.data()) + m.received, payload, len);
  m.received += len;
  if (m.received < m.total) return;
  if (m.bound) {
    if (m.recv.source) *m.recv.source = static_cast<std::int32_t>(from);
    complete(*m.recv.request, Status());
  }
  if (m.bound || m.discard) incoming_.erase(incoming_.begin() + static_cast<std::ptrdiff_t>(at));
}

void Mailbox::expire(Clock::time_point now) {
  for (std::size_t i = 0; i < sends_.size();) {
    if (sends_[i].deadline > now) {
      ++i;
      continue;
    }
    complete(*sends_[i].request,
             Status(ErrorCode::timeout, "send to rank " + std::to_string(sends_[i].peer) + " with tag " +
                                            std::to_string(sends_[i].tag) +
                                            ": deadline passed (SPARCOLL_DEADLINE_MS) before the channel took it"));
    sends_.erase(sends_.begin() + static_cast<std::ptrdiff_t>(i));
  }
  auto expired = [&](const Recv& r) {
    const std::string from = r.peer == kAnySource ? std::string("any rank") : "rank " + std::to_string(r.peer);
    complete(*r.request, Status(ErrorCode::timeout, "recv from " + from + " with tag " + std::to_string(r.tag) +
                                                        ": deadline passed (SPARCOLL_DEADLINE_MS), no message came"));
  };
  for (std::size_t i = 0; i < recvs_.size();) {
    if (recvs_[i].deadline > now) {
      ++i;
      continue;
    }
    expired(recvs_[i]);
    recvs_.erase(recvs_.begin() + static_cast<std::ptrdiff_t>(i));
  }
  for (std::size_t i = 0; i < incoming_.size();) {
    if (!incoming_[i].bound || incoming_[i].recv.deadline > now) {
      ++i;
      continue;
    }
    expired(incoming_[i].recv);
    incoming_.erase(incoming_.begin() + static_cast<std::ptrdiff_t>(i));  // later fragments: dropped
  }
}

void Mailbox::fail_all(const Status& why) {
  for (Send& s : sends_) complete(*s.request, why);
  for (Recv& r : recvs_) complete(*r.request, why);
  for (Incoming& m : incoming_)
    if (m.bound) complete(*m.recv.request, why);
  sends_.clear();
  recvs_.clear();
  std::erase_if(incoming_, [](const Incoming& m) { return m.bound; });
}

std::size_t Mailbox::unclaimed_bytes() const noexcept {
  std::size_t bytes = 0;
  for (const Incoming& m : incoming_) bytes += m.data.capacity();
  return bytes;
}

}  // namespace sparcoll::p2p
