// One POSIX shared-memory segment per process, holding that process's INBOUND rings: one per
// (sending peer, channel). Peers map it and write into their own ring; the owner reads.
//
// Layout: SegmentHeader | RingEntry[ring_count] | rings, each a RingControl followed by
// ring_bytes of data, 64-byte aligned. The entry table lets a sender find its rings without
// knowing the receiver's peer list; every field is checked against the segment size on open.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "shm_ring.hpp"
#include "sparcoll/status.hpp"

namespace sparcoll::transport::shm {

inline constexpr std::uint64_t kSegmentMagic = 0x3130474553435053ull;  // "SPCSEG01"
inline constexpr std::uint32_t kSegmentVersion = 1;

struct SegmentHeader {
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t owner_index;  // process index of the owner (the receiver)
  std::uint32_t ring_count;
  std::uint32_t max_message;  // largest message the owner accepts
  std::uint64_t ring_bytes;   // data bytes per ring, a power of two
  std::uint64_t total_bytes;  // size of the whole segment
  alignas(64) std::atomic<std::uint32_t> closed;  // set by the owner's driver destructor
};
static_assert(std::atomic<std::uint32_t>::is_always_lock_free, "the closed flag is shared between processes");

struct RingEntry {
  std::uint32_t sender;   // process index of the peer that writes this ring
  std::uint32_t channel;
  std::uint64_t offset;   // of the RingControl, from the segment start
};
static_assert(sizeof(RingEntry) == 16, "ring table entries are packed");

struct RingKey {
  std::uint32_t sender;
  std::uint32_t channel;
};

// Where things are in a segment: the table after the header, then the rings, each 64-byte aligned.
constexpr std::uint64_t segment_align64(std::uint64_t n) { return (n + 63) & ~std::uint64_t{63}; }
constexpr std::uint64_t segment_table_offset() { return segment_align64(sizeof(SegmentHeader)); }
constexpr std::uint64_t segment_first_ring_offset(std::uint64_t ring_count) {
  return segment_align64(segment_table_offset() + ring_count * sizeof(RingEntry));
}
constexpr std::uint64_t segment_ring_stride(std::uint64_t ring_bytes) { return sizeof(RingControl) + ring_bytes; }

// A segment's ring size and ring table as they were checked. The owner of a peer's segment can
// rewrite it at any time: a writer uses this copy, never the shared words again.
struct SegmentLayout {
  std::uint64_t ring_bytes = 0;
  std::vector<RingEntry> rings;
};

// Checks a peer's segment, mapped at `base` with `size` bytes, before anything else reads it:
// header, ring size and count, every ring of the table inside the mapping. Each shared word is
// read once; what was checked is copied to *out. `owner` and `name` name the peer and the
// segment in errors. Pure (no system call), so it can be fuzzed.
Status check_segment(const std::byte* base, std::uint64_t size, std::uint32_t owner_index, const std::string& owner,
                     const std::string& name, SegmentLayout* out);

class Segment {
 public:
  Segment() = default;
  Segment(Segment&& other) noexcept { *this = std::move(other); }
  Segment& operator=(Segment&& other) noexcept;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  ~Segment();

  // Creates and maps segment `name` with one ring per key. If a stale segment of that name is
  // left over from a crashed run, it is replaced.
  static Status create(const std::string& name, std::uint32_t owner_index, std::uint32_t max_message,
                       std::uint64_t ring_bytes, const std::vector<RingKey>& rings, Segment* out);
  // Maps a peer's segment and checks its header and ring table; `owner` names the peer in errors.
  static Status open(const std::string& name, std::uint32_t owner_index, const std::string& owner, Segment* out);

  // Removes the name (the memory lives on while mapped). Idempotent.
  void unlink();

  SegmentHeader* header() const { return reinterpret_cast<SegmentHeader*>(base_); }
  // The ring written by `sender` on `channel`, or nullptr if the segment has none.
  RingControl* ring(std::uint32_t sender, std::uint32_t channel) const;
  std::byte* ring_data(RingControl* control) const { return reinterpret_cast<std::byte*>(control + 1); }
  // Maps the pages of one ring of a peer's segment now, before the first message needs them.
  void populate(RingControl* control) const;
  std::uint64_t ring_bytes() const { return layout_.ring_bytes; }

 private:
  void reset();  // unlink (if ours) and unmap

  std::byte* base_ = nullptr;
  std::uint64_t size_ = 0;
  SegmentLayout layout_;  // as created, or as checked when opened
  std::string name_;
  bool linked_ = false;  // we created the name and have not removed it yet
};

// The segment name of process `index` with pid `owner_pid` in job `job_id`:
// "/sparcoll-<hash of job id>-<pid>-<index>", short and free of '/' whatever the id holds;
// the pid keeps two jobs that reuse an id on one host apart.
std::string segment_name(const std::string& job_id, std::int64_t owner_pid, std::uint32_t index);

// The owner's pid in a name made by segment_name, or -1 for a name of another form.
std::int64_t segment_owner_pid(const std::string& name);

// Removes this user's segments in /dev/shm whose owner process is gone, and that are older than
// min_age_s: a process killed between creating its segment and every peer mapping it (setup)
// leaves its name behind. The age keeps a segment of a live job in another pid namespace (whose
// owner's pid means nothing here) out of reach during its setup. Returns how many it removed.
int remove_stale_segments(int min_age_s);

// Removes the segments of the given owner pids (a launcher whose children are gone).
int remove_segments_of(const std::vector<std::int64_t>& pids);

}  // namespace sparcoll::transport::shm
