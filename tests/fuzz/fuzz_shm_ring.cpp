// Fuzz target: the shm ring (drivers/shm/shm_ring.cpp), whose two ends trust what the other
// process writes into shared memory: the reader trusts the record headers (kind, length) and
// the producer's tail, the writer trusts the consumer's head.
//
// The input drives one ring (a RingControl and a data area of exactly `capacity` bytes in its
// own allocation, so AddressSanitizer sees any access outside it) through a sequence of steps:
// honest writes (RingWriter::try_write of gathered payloads), reads (RingReader::next), releases,
// and a hostile peer scribbling over the data area, moving the tail, or moving the head (also
// before the reader and writer attach).
// Checks, always: whatever the shared bytes claim, the reader hands out only messages inside
// the data area, 8-byte aligned, at most max_message long, lying in what the producer published
// (between the consumer's position and the tail, never more than a ring ahead); the writer never
// writes outside the data area. While the peer is honest: the reader returns exactly the
// messages written, in order; try_write refuses only when the ring is really full; release()
// publishes exactly the bytes handed out.
#include <fuzzer/FuzzedDataProvider.h>
#include <sys/uio.h>

#include <cstring>
#include <deque>
#include <memory>
#include <vector>

#include "fuzz_check.hpp"
#include "shm_ring.hpp"

namespace sparcoll::fuzz {
namespace {

namespace shm = transport::shm;

struct Ring {
  explicit Ring(std::uint64_t capacity) : control(new shm::RingControl{}), data(new std::byte[capacity]()) {}
  std::unique_ptr<shm::RingControl> control;
  std::unique_ptr<std::byte[]> data;
};

// Where an honest reader is after handing out a message whose record starts at `record_pos`:
// the position before it, moved to the next lap when the record sits at the start of the ring
// and the position did not (the writer put a wrap record there), plus the record.
std::uint64_t advance(std::uint64_t head, std::uint64_t capacity, std::uint64_t record_pos, std::uint32_t len) {
  const std::uint64_t pos = head & (capacity - 1);
  if (record_pos != pos) {
    FUZZ_CHECK(record_pos == 0);
    head += capacity - pos;
  }
  return head + shm::record_bytes(len);
}

void run(FuzzedDataProvider& in) {
  const std::uint64_t capacity = std::uint64_t{64} << in.ConsumeIntegralInRange<int>(0, 6);  // 64 .. 4096
  // The reader's max_message fits its ring (the driver checks it); the writer's messages are
  // bounded by that too, but its ring comes from the peer's segment: any size may face them.
  const std::uint32_t max_message = in.ConsumeIntegralInRange<std::uint32_t>(0, 4096);
  Ring ring(capacity);
  // The peers map the segment before the owner builds its readers: the counters may already
  // hold anything.
  bool hostile = false;  // the shared memory no longer follows the protocol
  if (in.ConsumeIntegralInRange<int>(0, 7) == 0) {
    hostile = true;
    ring.control->head.store(in.ConsumeIntegral<std::uint64_t>());
    ring.control->tail.store(in.ConsumeIntegral<std::uint64_t>());
  }
  shm::RingWriter writer(ring.control.get(), ring.data.get(), capacity);
  shm::RingReader reader(ring.control.get(), ring.data.get(), capacity, max_message);
  const std::byte* const begin = ring.data.get();
  const std::byte* const end = begin + capacity;

  std::deque<std::vector<std::byte>> pending;          // written, not handed out yet (honest peer)
  std::uint64_t writer_tail = ring.control->tail.load();  // the honest writer's own counter
  std::vector<std::uint64_t> tails{writer_tail};        // every value the tail has held

  for (int step = 0; step < 512 && in.remaining_bytes() > 0; ++step) {
    switch (in.ConsumeIntegralInRange<int>(0, 7)) {
      case 0:
      case 1: {  // an honest write of up to three pieces
        const std::uint32_t len = in.ConsumeIntegralInRange<std::uint32_t>(0, max_message);
        std::vector<std::byte> payload(len);
        for (std::uint32_t i = 0; i < len; ++i) payload[i] = static_cast<std::byte>(in.ConsumeIntegral<std::uint8_t>());
        const std::size_t cut1 = in.ConsumeIntegralInRange<std::size_t>(0, len);
        const std::size_t cut2 = in.ConsumeIntegralInRange<std::size_t>(cut1, len);
        iovec iov[3] = {{payload.data(), cut1}, {payload.data() + cut1, cut2 - cut1}, {payload.data() + cut2, len - cut2}};
        // What the ring can take, by the consumer's published head.
        const std::uint64_t head = ring.control->head.load();
        const std::uint64_t bytes = shm::record_bytes(len);
        const std::uint64_t to_end = capacity - (writer_tail & (capacity - 1));
        const std::uint64_t needed = bytes <= to_end ? bytes : to_end + bytes;
        const bool fits = writer_tail - head <= capacity && needed <= capacity - (writer_tail - head);
        const bool written = writer.try_write(iov, 3, len);
        if (!hostile) FUZZ_CHECK(written == fits);
        if (written) {
          writer_tail += needed;
          tails.push_back(ring.control->tail.load());
          if (!hostile) {
            FUZZ_CHECK(ring.control->tail.load() == writer_tail);
            pending.push_back(std::move(payload));
          }
        }
        break;
      }
      case 2:
      case 3: {  // the consumer takes the next message
        const std::byte* data = nullptr;
        std::uint32_t len = 0;
        const std::uint64_t before = reader.position();
        const shm::RingReader::Next next = reader.next(&data, &len);
        if (next == shm::RingReader::Next::corrupt) {
          FUZZ_CHECK(hostile);  // an honest producer never looks corrupt
          return;               // the channel fails here
        }
        if (next == shm::RingReader::Next::empty) {
          if (!hostile) FUZZ_CHECK(pending.empty());
          break;
        }
        FUZZ_CHECK(data >= begin + sizeof(shm::RecordHeader) && data <= end && len <= static_cast<std::size_t>(end - data));
        FUZZ_CHECK(reinterpret_cast<std::uintptr_t>(data) % 8 == 0);
        FUZZ_CHECK(len <= max_message);
        touch(data, len);
        // The record lies in what the producer published: it ends at or before a tail the
        // producer stored (the reader may use one it loaded earlier), and that tail was never
        // more than a ring ahead of the consumer.
        const std::uint64_t after = reader.position();
        const std::uint64_t record_pos = static_cast<std::uint64_t>(data - begin) - sizeof(shm::RecordHeader);
        FUZZ_CHECK(after - before >= shm::record_bytes(len));
        FUZZ_CHECK(((after - shm::record_bytes(len)) & (capacity - 1)) == record_pos);
        bool published = false;
        for (const std::uint64_t tail : tails) published = published || (tail - before <= capacity && after - before <= tail - before);
        FUZZ_CHECK(published);
        if (!hostile) FUZZ_CHECK(after == advance(before, capacity, record_pos, len));
        if (!hostile) {
          FUZZ_CHECK(!pending.empty() && pending.front().size() == len);
          FUZZ_CHECK(len == 0 || std::memcmp(data, pending.front().data(), len) == 0);
          pending.pop_front();
        }
        break;
      }
      case 4:  // the consumer gives the space back
        reader.release();
        if (!hostile) {
          FUZZ_CHECK(ring.control->head.load() == reader.position());
          FUZZ_CHECK(reader.drained() == pending.empty());
        }
        break;
      case 5: {  // the peer scribbles over the data area
        hostile = true;
        const std::uint64_t at = in.ConsumeIntegralInRange<std::uint64_t>(0, capacity - 1);
        const std::uint64_t n = in.ConsumeIntegralInRange<std::uint64_t>(1, std::min<std::uint64_t>(16, capacity - at));
        for (std::uint64_t i = 0; i < n; ++i) ring.data[at + i] = static_cast<std::byte>(in.ConsumeIntegral<std::uint8_t>());
        break;
      }
      case 6: {  // the producer's tail moves anywhere: a little, or to any value
        hostile = true;
        const std::uint64_t tail = ring.control->tail.load();
        ring.control->tail.store(in.ConsumeBool() ? tail + 8 * in.ConsumeIntegralInRange<std::int64_t>(-64, 64)
                                                  : in.ConsumeIntegral<std::uint64_t>());
        tails.push_back(ring.control->tail.load());
        break;
      }
      case 7: {  // the consumer's head moves anywhere: the writer must stay inside the ring
        hostile = true;
        const std::uint64_t head = ring.control->head.load();
        ring.control->head.store(in.ConsumeBool() ? head + 8 * in.ConsumeIntegralInRange<std::int64_t>(-64, 64)
                                                  : in.ConsumeIntegral<std::uint64_t>());
        break;
      }
    }
  }
}

}  // namespace
}  // namespace sparcoll::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  sparcoll::fuzz::run(in);
  return 0;
}
