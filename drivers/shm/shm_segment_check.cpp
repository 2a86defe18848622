// The checks a process makes on a peer's segment before it trusts any of it: the peer is in our
// job, but every field it wrote is read as hostile (shm_segment.hpp has the layout).
#include "shm_segment.hpp"

namespace sparcoll::transport::shm {

Status check_segment(const std::byte* base, std::uint64_t size, std::uint32_t owner_index, const std::string& owner,
                     const std::string& name) {
  if (size < segment_first_ring_offset(0))
    return Status(ErrorCode::protocol_error, owner + "'s shm segment " + name + " is too small (" + std::to_string(size) +
                                                 " bytes) to hold a header");
  const auto* header = reinterpret_cast<const SegmentHeader*>(base);
  auto bad = [&](const std::string& what) {
    return Status(ErrorCode::protocol_error, owner + "'s shm segment " + name + " is invalid: " + what);
  };
  if (header->magic != kSegmentMagic) return bad("bad magic");
  if (header->version != kSegmentVersion)
    return Status(ErrorCode::mismatch, owner + "'s shm segment has layout version " + std::to_string(header->version) +
                                           ", this process expects " + std::to_string(kSegmentVersion));
  if (header->owner_index != owner_index)
    return bad("it belongs to process " + std::to_string(header->owner_index) + ", not " + std::to_string(owner_index));
  const std::uint64_t ring_bytes = header->ring_bytes;
  if (ring_bytes < 64 || (ring_bytes & (ring_bytes - 1)) != 0 || ring_bytes > (std::uint64_t{1} << 40))
    return bad("ring size " + std::to_string(ring_bytes) + " is not a sane power of two");
  if (header->ring_count > (1u << 20)) return bad("ring count " + std::to_string(header->ring_count));
  const std::uint64_t expected =
      segment_first_ring_offset(header->ring_count) + header->ring_count * segment_ring_stride(ring_bytes);
  if (header->total_bytes != expected || size < expected)
    return bad("size " + std::to_string(size) + " does not match its " + std::to_string(header->ring_count) + " rings");
  const auto* entries = reinterpret_cast<const RingEntry*>(base + segment_table_offset());
  for (std::uint32_t i = 0; i < header->ring_count; ++i) {
    const std::uint64_t offset = entries[i].offset;
    // offset + stride could wrap past 2^64 and look small: compare with what is left after offset.
    if (offset < segment_first_ring_offset(header->ring_count) || offset % 64 != 0 || offset > size ||
        segment_ring_stride(ring_bytes) > size - offset)
      return bad("ring " + std::to_string(i) + " lies outside the segment");
  }
  return Status::Ok();
}

}  // namespace sparcoll::transport::shm
