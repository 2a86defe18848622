// What a tcp channel has not yet written to a peer's socket, in order: frames copied into a
// bounded byte ring, and stretches of a caller's memory queued by reference (send(…,
// UserMemory): the caller keeps that memory unchanged until the queue has written it, so the
// payload of a large message is copied once, by the kernel, instead of twice). send() takes a
// whole frame or nothing (back-pressure); flush hands the queue to sendmsg as up to `max`
// iovecs, so a burst of frames still leaves in one call.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

namespace sparcoll::transport::tcp {

class SendQueue {
 public:
  SendQueue() = default;
  // ring_bytes and segments: powers of two. A segment is one stretch of queued bytes: a run of
  // copied bytes (adjacent copies share one) or one reference.
  SendQueue(std::size_t ring_bytes, std::size_t segments)
      : ring_(new std::byte[ring_bytes]), ring_capacity_(ring_bytes), segments_(new Segment[segments]),
        segment_capacity_(segments) {}

  bool empty() const { return segment_head_ == segment_tail_; }
  // Whether `copied` more bytes and `pushes` more push calls fit.
  bool can_take(std::size_t copied, std::size_t pushes) const {
    return ring_capacity_ - static_cast<std::size_t>(ring_tail_ - ring_head_) >= copied &&
           segment_capacity_ - static_cast<std::size_t>(segment_tail_ - segment_head_) >= pushes;
  }
  // Whether some caller's memory is still queued by reference.
  bool holds_references() const { return references_ != 0; }
  // Copies what is queued by reference, so that the callers may take their memory back now (a
  // collective that failed, whose frames may leave much later or never). Allocates: for the
  // failure path only.
  void own_references() {
    for (std::uint64_t s = segment_head_; s != segment_tail_ && references_ != 0; ++s) {
      Segment& seg = segments_[s & (segment_capacity_ - 1)];
      if (seg.external == nullptr || seg.owned) continue;
      owned_.emplace_back(new std::byte[seg.len]);
      std::memcpy(owned_.back().get(), seg.external, seg.len);
      seg.external = owned_.back().get();
      seg.owned = true;
      --references_;
    }
  }

  // Appends a copy of len bytes; the caller checked can_take.
  void push(const void* bytes, std::size_t len) {
    // An empty message's iovec may have a null base, and memcpy from null is undefined even for
    // 0 bytes (UBSan reports it; the compiler may assume the pointer non-null).
    if (len == 0) return;
    const std::size_t pos = static_cast<std::size_t>(ring_tail_) & (ring_capacity_ - 1);
    const std::size_t first = len < ring_capacity_ - pos ? len : ring_capacity_ - pos;
    std::memcpy(ring_.get() + pos, bytes, first);
    std::memcpy(ring_.get(), static_cast<const std::byte*>(bytes) + first, len - first);
    ring_tail_ += len;
    if (!empty() && last().external == nullptr) {
      last().len += len;
      return;
    }
    segments_[segment_tail_++ & (segment_capacity_ - 1)] = Segment{nullptr, len, false};
  }
  // Appends len bytes of the caller's memory by reference; the caller checked can_take.
  void push_reference(const void* bytes, std::size_t len) {
    if (len == 0) return;
    segments_[segment_tail_++ & (segment_capacity_ - 1)] = Segment{static_cast<const std::byte*>(bytes), len, false};
    ++references_;
  }

  // The queued bytes, in order, as at most `max` iovecs (max >= 2); returns how many.
  int readable(struct iovec* iov, int max) const {
    int n = 0;
    std::uint64_t ring_pos = ring_head_;
    std::size_t skip = head_offset_;
    for (std::uint64_t s = segment_head_; s != segment_tail_ && n < max; ++s) {
      const Segment& seg = segments_[s & (segment_capacity_ - 1)];
      const std::size_t len = seg.len - skip;
      if (seg.external != nullptr) {
        iov[n++] = {const_cast<std::byte*>(seg.external) + skip, len};
      } else {
        const std::size_t pos = static_cast<std::size_t>(ring_pos) & (ring_capacity_ - 1);
        const std::size_t first = len < ring_capacity_ - pos ? len : ring_capacity_ - pos;
        iov[n++] = {ring_.get() + pos, first};
        if (first < len) {
          if (n == max) return n;  // the rest of this segment next time
          iov[n++] = {ring_.get(), len - first};
        }
        ring_pos += len;
      }
      skip = 0;
    }
    return n;
  }
  // len bytes were written: drops them from the front.
  void consume(std::size_t len) {
    while (len > 0) {
      Segment& seg = segments_[segment_head_ & (segment_capacity_ - 1)];
      const std::size_t rest = seg.len - head_offset_;
      const std::size_t take = len < rest ? len : rest;
      if (seg.external == nullptr) ring_head_ += take;
      head_offset_ += take;
      len -= take;
      if (head_offset_ == seg.len) {
        if (seg.external != nullptr && !seg.owned) --references_;
        ++segment_head_;
        head_offset_ = 0;
      }
    }
    if (empty() && !owned_.empty()) owned_.clear();
  }
  // Forgets everything queued (a peer that is gone will never take it).
  void clear() {
    ring_head_ = ring_tail_;
    segment_head_ = segment_tail_;
    head_offset_ = 0;
    references_ = 0;
    owned_.clear();
  }

 private:
  struct Segment {
    const std::byte* external;  // the caller's memory (or its copy), or null: the next len bytes of the ring
    std::size_t len;
    bool owned;                 // external is a copy in owned_ (own_references)
  };
  Segment& last() { return segments_[(segment_tail_ - 1) & (segment_capacity_ - 1)]; }

  std::unique_ptr<std::byte[]> ring_;
  std::size_t ring_capacity_ = 0;
  std::uint64_t ring_head_ = 0;  // ring bytes written to the socket
  std::uint64_t ring_tail_ = 0;  // ring bytes queued
  std::unique_ptr<Segment[]> segments_;
  std::size_t segment_capacity_ = 0;
  std::uint64_t segment_head_ = 0;
  std::uint64_t segment_tail_ = 0;
  std::size_t head_offset_ = 0;  // bytes of the first segment already written
  std::size_t references_ = 0;   // reference segments queued (not owned)
  std::vector<std::unique_ptr<std::byte[]>> owned_;  // copies made by own_references, freed once empty
};

}  // namespace sparcoll::transport::tcp
