// Fuzz target: the checks a process makes on a peer's shm segment before it writes into it
// (check_segment, drivers/shm/shm_segment_check.cpp): header, ring size and count, ring table.
//
// 1. The input, as the bytes of a mapped segment: whatever the header and table say, an accepted
//    segment has a sane power-of-two ring size, a total size that matches its ring count, and
//    every ring of its table (a RingControl and ring_bytes of data, 64-byte aligned) inside the
//    mapping: every byte of each is then touched, as the writer will, so AddressSanitizer sees
//    a ring that lies outside the input. The layout handed out is exactly what was checked. A
//    refused one says why and hands nothing out.
// 2. The same bytes as choices for a segment laid out as Segment::create lays it out (owner,
//    max message, ring size, rings): accepted, with that layout.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "fuzz_check.hpp"
#include "fuzz_params.hpp"
#include "shm_segment.hpp"

namespace sparcoll::fuzz {
namespace {

namespace shm = transport::shm;

constexpr std::uint32_t kOwner = kShmOwner;

void check_raw(const std::uint8_t* bytes, std::size_t size) {
  const ExactCopy copy(bytes, size, alignof(shm::SegmentHeader));  // mmap gives page alignment
  shm::SegmentLayout layout;
  const Status st = shm::check_segment(copy.data(), copy.size(), kOwner, "rank 3", "/fuzz", &layout);
  if (!st.ok()) {
    FUZZ_CHECK(st.code() == ErrorCode::protocol_error || st.code() == ErrorCode::mismatch);
    FUZZ_CHECK(!st.message().empty());
    FUZZ_CHECK(layout.ring_bytes == 0 && layout.rings.empty());  // nothing half-checked comes out
    return;
  }
  FUZZ_CHECK(size >= sizeof(shm::SegmentHeader));
  shm::SegmentHeader h;
  std::memcpy(static_cast<void*>(&h), copy.data(), offsetof(shm::SegmentHeader, closed));
  FUZZ_CHECK(h.magic == shm::kSegmentMagic && h.version == shm::kSegmentVersion && h.owner_index == kOwner);
  FUZZ_CHECK(layout.ring_bytes == h.ring_bytes && layout.rings.size() == h.ring_count);
  FUZZ_CHECK(h.ring_bytes >= 64 && (h.ring_bytes & (h.ring_bytes - 1)) == 0);
  const std::uint64_t first = shm::segment_first_ring_offset(h.ring_count);
  const std::uint64_t stride = shm::segment_ring_stride(h.ring_bytes);
  FUZZ_CHECK(h.total_bytes == first + h.ring_count * stride && h.total_bytes <= size);
  for (std::uint32_t i = 0; i < h.ring_count; ++i) {
    shm::RingEntry e;
    std::memcpy(&e, copy.data() + shm::segment_table_offset() + i * sizeof e, sizeof e);
    const shm::RingEntry& kept = layout.rings[i];
    FUZZ_CHECK(kept.sender == e.sender && kept.channel == e.channel && kept.offset == e.offset);
    // In 128-bit arithmetic, so this check cannot wrap.
    FUZZ_CHECK(e.offset >= first && e.offset % 64 == 0 &&
               static_cast<unsigned __int128>(e.offset) + stride <= static_cast<unsigned __int128>(size));
    touch(copy.data() + e.offset, stride);  // what the writer will touch
  }
}

void round_trip(FuzzedDataProvider& in) {
  const std::uint64_t ring_bytes = std::uint64_t{64} << in.ConsumeIntegralInRange<int>(0, 4);
  const std::uint32_t ring_count = in.ConsumeIntegralInRange<std::uint32_t>(0, 8);
  const std::uint64_t first = shm::segment_first_ring_offset(ring_count);
  const std::uint64_t size = first + ring_count * shm::segment_ring_stride(ring_bytes);
  const std::vector<std::byte> zeros(size);
  const ExactCopy image(zeros.data(), size, alignof(shm::SegmentHeader));  // zeroed, like ftruncate's pages
  std::byte* base = image.data();
  auto* h = new (base) shm::SegmentHeader{};
  h->magic = shm::kSegmentMagic;
  h->version = shm::kSegmentVersion;
  h->owner_index = kOwner;
  h->ring_count = ring_count;
  h->max_message = in.ConsumeIntegral<std::uint32_t>();
  h->ring_bytes = ring_bytes;
  h->total_bytes = size;
  auto* table = reinterpret_cast<shm::RingEntry*>(base + shm::segment_table_offset());
  for (std::uint32_t i = 0; i < ring_count; ++i)
    table[i] = shm::RingEntry{in.ConsumeIntegral<std::uint32_t>(), in.ConsumeIntegral<std::uint32_t>(),
                              first + i * shm::segment_ring_stride(ring_bytes)};
  const ExactCopy copy(base, size, alignof(shm::SegmentHeader));
  shm::SegmentLayout layout;
  const Status st = shm::check_segment(copy.data(), copy.size(), kOwner, "rank 3", "/fuzz", &layout);
  if (!st.ok()) std::fprintf(stderr, "fuzz: a segment laid out like Segment::create was refused: %s\n", st.message().c_str());
  FUZZ_CHECK(st.ok());
  FUZZ_CHECK(layout.ring_bytes == ring_bytes && layout.rings.size() == ring_count);
  for (std::uint32_t i = 0; i < ring_count; ++i)
    FUZZ_CHECK(layout.rings[i].sender == table[i].sender && layout.rings[i].channel == table[i].channel &&
               layout.rings[i].offset == table[i].offset);
}

}  // namespace
}  // namespace sparcoll::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  sparcoll::fuzz::check_raw(data, size);
  FuzzedDataProvider in(data, size);
  sparcoll::fuzz::round_trip(in);
  return 0;
}
