// The checks a process makes on a peer's segment before it trusts any of it: the peer is in our
// job, but every field it wrote is read as hostile (shm_segment.hpp has the layout).
#include <cstddef>
#include <cstring>

#include "shm_segment.hpp"

namespace sparcoll::transport::shm {

namespace {

// One shared word, read once.
template <typename T>
T read_once(const std::byte* at) {
  T value;
  std::memcpy(&value, at, sizeof value);
  return value;
}

}  // namespace

Status check_segment(const std::byte* base, std::uint64_t size, std::uint32_t owner_index, const std::string& owner,
                     const std::string& name, SegmentLayout* out) {
  if (size < segment_first_ring_offset(0))
    return Status(ErrorCode::protocol_error, owner + "'s shm segment " + name + " is too small (" + std::to_string(size) +
                                                 " bytes) to hold a header");
  auto bad = [&](const std::string& what) {
    return Status(ErrorCode::protocol_error, owner + "'s shm segment " + name + " is invalid: " + what);
  };
  const auto magic = read_once<std::uint64_t>(base + offsetof(SegmentHeader, magic));
  const auto version = read_once<std::uint32_t>(base + offsetof(SegmentHeader, version));
  const auto owner_in_header = read_once<std::uint32_t>(base + offsetof(SegmentHeader, owner_index));
  const auto ring_count = read_once<std::uint32_t>(base + offsetof(SegmentHeader, ring_count));
  const auto ring_bytes = read_once<std::uint64_t>(base + offsetof(SegmentHeader, ring_bytes));
  const auto total_bytes = read_once<std::uint64_t>(base + offsetof(SegmentHeader, total_bytes));
  if (magic != kSegmentMagic) return bad("bad magic");
  if (version != kSegmentVersion)
    return Status(ErrorCode::mismatch, owner + "'s shm segment has layout version " + std::to_string(version) +
                                           ", this process expects " + std::to_string(kSegmentVersion));
  if (owner_in_header != owner_index)
    return bad("it belongs to process " + std::to_string(owner_in_header) + ", not " + std::to_string(owner_index));
  if (ring_bytes < 64 || (ring_bytes & (ring_bytes - 1)) != 0 || ring_bytes > (std::uint64_t{1} << 40))
    return bad("ring size " + std::to_string(ring_bytes) + " is not a sane power of two");
  if (ring_count > (1u << 20)) return bad("ring count " + std::to_string(ring_count));
  const std::uint64_t expected = segment_first_ring_offset(ring_count) + ring_count * segment_ring_stride(ring_bytes);
  if (total_bytes != expected || size < expected)
    return bad("size " + std::to_string(size) + " does not match its " + std::to_string(ring_count) + " rings");
  SegmentLayout layout;
  layout.ring_bytes = ring_bytes;
  layout.rings.resize(ring_count);
  if (ring_count > 0)
    std::memcpy(layout.rings.data(), base + segment_table_offset(), ring_count * sizeof(RingEntry));
  for (std::uint32_t i = 0; i < ring_count; ++i) {
    const std::uint64_t offset = layout.rings[i].offset;
    // offset + stride could wrap past 2^64 and look small: compare with what is left after offset.
    if (offset < segment_first_ring_offset(ring_count) || offset % 64 != 0 || offset > size ||
        segment_ring_stride(ring_bytes) > size - offset)
      return bad("ring " + std::to_string(i) + " lies outside the segment");
  }
  *out = std::move(layout);
  return Status::Ok();
}

}  // namespace sparcoll::transport::shm
