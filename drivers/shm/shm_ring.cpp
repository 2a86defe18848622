#include "shm_ring.hpp"

#include <chrono>
#include <cstring>

namespace sparcoll::transport::shm {

RingWriter::RingWriter(RingControl* control, std::byte* data, std::uint64_t capacity, StoreMode stores)
    : control_(control), data_(data), capacity_(capacity), stores_(stores) {
  // A writer attaches to a freshly created ring, but read the counters anyway so that
  // attaching never corrupts a ring in use.
  tail_ = control_->tail.load(std::memory_order_relaxed);
  head_cache_ = control_->head.load(std::memory_order_acquire);
}

bool RingWriter::try_write(const struct iovec* iov, int iovcnt, std::uint32_t len) {
  const std::uint64_t bytes = record_bytes(len);
  const std::uint64_t pos = tail_ & (capacity_ - 1);
  // Our tail came from shared memory when we attached: records are 8-byte aligned, so one that
  // is not could only put a header across the end of the ring. Such a ring stays full.
  if (pos % sizeof(RecordHeader) != 0) return false;
  const std::uint64_t to_end = capacity_ - pos;
  const std::uint64_t needed = bytes <= to_end ? bytes : to_end + bytes;
  // head is the consumer's, another process: one that claims to be ahead of tail_ (or more than
  // a ring behind) would make the free space wrap to a huge number and the copy run past the
  // ring. Such a ring stays full.
  auto fits = [&] { return tail_ - head_cache_ <= capacity_ && capacity_ - (tail_ - head_cache_) >= needed; };
  if (!fits()) {
    head_cache_ = control_->head.load(std::memory_order_acquire);
    if (!fits()) return false;
  }
  std::uint64_t at = pos;
  if (bytes > to_end) {
    auto* wrap = reinterpret_cast<RecordHeader*>(data_ + pos);
    wrap->len = static_cast<std::uint32_t>(to_end - sizeof(RecordHeader));
    wrap->kind = kRecordWrap;
    tail_ += to_end;
    at = 0;
  }
  auto* header = reinterpret_cast<RecordHeader*>(data_ + at);
  header->len = len;
  header->kind = kRecordMessage;
  std::byte* payload = data_ + at + sizeof(RecordHeader);
  const bool stream = stores_.stream_next(len);
  const bool timed = stores_.measures(len);  // not with SPARCOLL_SHM_STREAMING_STORES=on or off
  const auto started = timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  for (int i = 0; i < iovcnt; ++i) {
    if (iov[i].iov_len == 0) continue;
    if (stream && iov[i].iov_len >= 4096)
      stream_copy(payload, iov[i].iov_base, iov[i].iov_len);
    else
      std::memcpy(payload, iov[i].iov_base, iov[i].iov_len);
    payload += iov[i].iov_len;
  }
  if (stream) stream_fence();
  if (timed) {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - started);
    stores_.record(len, stream, static_cast<std::uint64_t>(ns.count()));
  }
  tail_ += bytes;
  control_->tail.store(tail_, std::memory_order_release);
  return true;
}

RingReader::RingReader(RingControl* control, std::byte* data, std::uint64_t capacity, std::uint32_t max_message)
    : control_(control), data_(data), capacity_(capacity), max_message_(max_message) {
  head_ = control_->head.load(std::memory_order_relaxed);
  released_ = head_;
  tail_cache_ = head_;
}

RingReader::Next RingReader::next(const std::byte** data, std::uint32_t* len) {
  for (;;) {
    if (head_ == tail_cache_) {
      tail_cache_ = control_->tail.load(std::memory_order_acquire);
      if (head_ == tail_cache_) return Next::empty;
      // The producer never publishes more than a ring ahead of what we read. A tail behind us or
      // beyond that is corrupt: trusted, it would make every bound below pass (tail - head
      // wraps to a huge number) and hand out stale or never-written records.
      if (tail_cache_ - head_ > capacity_) return Next::corrupt;
    }
    const std::uint64_t pos = head_ & (capacity_ - 1);
    // Our head came from shared memory when we attached: one that is not 8-byte aligned would
    // put a header across the end of the ring.
    if (pos % sizeof(RecordHeader) != 0) return Next::corrupt;
    // The peer is in our job but writes memory we read: check every bound before trusting it,
    // and read the header once. Read field by field from shared memory, a peer rewriting it
    // between the check and the use would get an unchecked length past us.
    auto* header = reinterpret_cast<RecordHeader*>(data_ + pos);
    const std::uint32_t kind = std::atomic_ref<std::uint32_t>(header->kind).load(std::memory_order_relaxed);
    const std::uint32_t record_len = std::atomic_ref<std::uint32_t>(header->len).load(std::memory_order_relaxed);
    const std::uint64_t to_end = capacity_ - pos;
    if (kind == kRecordWrap) {
      if (record_len != to_end - sizeof(RecordHeader) || tail_cache_ - head_ < to_end) return Next::corrupt;
      head_ += to_end;
      continue;
    }
    const std::uint64_t bytes = record_bytes(record_len);
    if (kind != kRecordMessage || record_len > max_message_ || bytes > to_end || tail_cache_ - head_ < bytes)
      return Next::corrupt;
    *data = data_ + pos + sizeof(RecordHeader);
    *len = record_len;
    head_ += bytes;
    return Next::message;
  }
}

}  // namespace sparcoll::transport::shm
