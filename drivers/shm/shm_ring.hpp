// Single-producer single-consumer message ring in shared memory.
//
// Layout: a RingControl (head and tail on their own cache lines) followed by `capacity` data
// bytes (a power of two). head and tail are monotonic 64-bit byte counters; position = counter
// & (capacity - 1). Records are [u32 len | u32 kind][payload padded to 8]. A message that
// does not fit before the end of the data area is preceded by a wrap record that fills the rest
// of it, so the consumer always sees a message as one contiguous, 8-byte aligned block.
//
// The producer publishes a record with one release store of tail; the consumer hands records
// out in place and gives their space back with one release store of head at its next poll.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "ring_stores.hpp"

namespace sparcoll::transport::shm {

struct alignas(64) RingControl {
  std::atomic<std::uint64_t> tail{0};  // bytes published by the producer
  char tail_pad[64 - sizeof(std::atomic<std::uint64_t>)];
  std::atomic<std::uint64_t> head{0};  // bytes released by the consumer
  char head_pad[64 - sizeof(std::atomic<std::uint64_t>)];
};
static_assert(sizeof(RingControl) == 128, "head and tail each own one cache line");
static_assert(std::atomic<std::uint64_t>::is_always_lock_free, "ring counters are shared between processes");

struct RecordHeader {
  std::uint32_t len;   // payload bytes (message) or bytes skipped after this header (wrap)
  std::uint32_t kind;  // kRecordMessage or kRecordWrap; zeroed memory is neither
};
static_assert(sizeof(RecordHeader) == 8, "records stay 8-byte aligned");

inline constexpr std::uint32_t kRecordMessage = 0x4d534731;  // "MSG1"
inline constexpr std::uint32_t kRecordWrap = 0x57524150;     // "WRAP"

// Bytes a message of `len` payload bytes occupies in the ring.
constexpr std::uint64_t record_bytes(std::uint64_t len) { return sizeof(RecordHeader) + ((len + 7) & ~std::uint64_t{7}); }

// Ring capacity needed so that any message up to max_message fits, wherever the ring stands:
// a wrap can waste up to one record's worth at the end.
constexpr std::uint64_t min_ring_bytes(std::uint32_t max_message) { return 2 * record_bytes(max_message); }

// The sending side; lives in the sender's process, writes into the receiver's segment.
class RingWriter {
 public:
  RingWriter() = default;
  RingWriter(RingControl* control, std::byte* data, std::uint64_t capacity, StoreMode stores = StoreMode::automatic);

  // Copies the gathered message into the ring. False (nothing written) when it does not fit,
  // or when the counters are corrupt: the consumer's head not within one ring behind our tail,
  // or a tail that was not 8-byte aligned when we attached.
  bool try_write(const struct iovec* iov, int iovcnt, std::uint32_t len);

 private:
  RingControl* control_ = nullptr;
  std::byte* data_ = nullptr;
  std::uint64_t capacity_ = 0;
  std::uint64_t tail_ = 0;        // our own counter; control_->tail mirrors it
  std::uint64_t head_cache_ = 0;  // last head seen; reloaded only when the ring looks full
  RingStores stores_;             // ordinary or streaming stores for a large message (ring_stores.hpp)
};

// The receiving side; lives in the owner of the segment.
class RingReader {
 public:
  enum class Next : std::uint8_t { message, empty, corrupt };

  RingReader() = default;
  RingReader(RingControl* control, std::byte* data, std::uint64_t capacity, std::uint32_t max_message);

  // Hands out the next message in place; it stays valid until release().
  Next next(const std::byte** data, std::uint32_t* len);
  // Gives the space of every message handed out so far back to the producer.
  void release() {
    if (head_ != released_) {
      control_->head.store(head_, std::memory_order_release);
      released_ = head_;
    }
  }
  // Bytes handed out so far, wrap records included: the head release() publishes next.
  std::uint64_t position() const { return head_; }
  // True when the producer has published nothing we have not handed out (reloads tail).
  bool drained() {
    tail_cache_ = control_->tail.load(std::memory_order_acquire);
    return tail_cache_ == head_;
  }

 private:
  RingControl* control_ = nullptr;
  std::byte* data_ = nullptr;
  std::uint64_t capacity_ = 0;
  std::uint32_t max_message_ = 0;
  std::uint64_t head_ = 0;        // next byte to read
  std::uint64_t released_ = 0;    // last value stored to control_->head
  std::uint64_t tail_cache_ = 0;  // last tail seen; reloaded only when we caught up with it
};

}  // namespace sparcoll::transport::shm
