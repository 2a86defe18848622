// How a ring writer copies a large message into the receiver's ring: with ordinary stores, or
// with streaming (non-temporal) stores that bypass the writer's cache.
//
// Why both. A ring is reused lap after lap, so the receiver still holds in its cache the lines
// the writer is about to overwrite, and every ordinary store first has to take its line back
// from the receiver's core. Where the two cores share a cache that costs little: a 2-rank ring
// allreduce of 16 MiB took 2.0-3.0 ms, and the writer copied at 17 GB/s. Where they do not
// (two cores whose round trip for one cache line is 400-600 ns: how the project's host placed
// its vCPUs for minutes at a time, and how ranks on two dies or sockets sit) the writer copied
// at 2.3-2.7 GB/s and the allreduce took 12.4-13.9 ms. Streaming stores skip taking the line:
// they copied at 17-21 GB/s there and the allreduce took 2.0-2.9 ms. But where the cores share
// a cache, streaming stores send the message to memory instead of leaving it in the cache the
// receiver reads from: 1 MiB took 125-140 us against 55 (docs/perf.md, "Two placements of the
// host").
//
// So the writer measures. Each large copy is timed (two clock reads per copy of at least
// kStreamMinBytes); each way keeps its best time per byte of its last kWindow copies (a copy the
// scheduler interrupted, or one that faulted pages in, is only ever slower, so the best of a few
// is the way's speed); ordinary stores stay unless streaming ones copied at least twice as fast
// (the writer cannot see the receiver's side of the cost, which only ordinary stores avoid, so
// it takes streaming stores only for a large win), and the way not in use is tried again every
// kProbeEvery large copies, since the host moves the cores.
// The choice changes how fast bytes arrive, never which bytes: the result is the same.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sparcoll::transport::shm {

// Copies n bytes with streaming stores (any alignment; the unaligned ends ordinarily).
void stream_copy(void* dst, const void* src, std::size_t n) noexcept;
// Orders every streaming store before the stores after it: streaming stores are weakly ordered,
// and the record's publication (a release store of the ring's tail) must not overtake them.
void stream_fence() noexcept;

// SPARCOLL_SHM_STREAMING_STORES.
enum class StoreMode : std::uint8_t { automatic, always, never };

class RingStores {
 public:
  static constexpr std::size_t kStreamMinBytes = 32 * 1024;
  static constexpr std::uint32_t kProbeEvery = 64;

  explicit RingStores(StoreMode mode = StoreMode::automatic) : mode_(mode) {}

  // Whether the next copy of n bytes should stream: first one copy each way, then the faster
  // by the rule above, and every kProbeEvery-th large copy the other way.
  bool stream_next(std::size_t n) const noexcept {
    if (n < kStreamMinBytes || mode_ == StoreMode::never) return false;
    if (mode_ == StoreMode::always) return true;
    if (!measured(0)) return false;
    if (!measured(1)) return true;
    return since_probe_ + 1 >= kProbeEvery ? !prefer_stream() : prefer_stream();
  }
  // Whether a copy of n bytes is to be timed for record(): only where the choice is measured.
  bool measures(std::size_t n) const noexcept { return n >= kStreamMinBytes && mode_ == StoreMode::automatic; }
  // The copy just made: n bytes, streamed or not, in ns nanoseconds.
  void record(std::size_t n, bool streamed, std::uint64_t ns) noexcept;
  bool streaming() const noexcept { return prefer_stream(); }

 private:
  static constexpr std::uint32_t kWindow = 4;
  bool measured(int way) const noexcept { return copies_[way] > 0; }
  // The way's best nanoseconds per KiB over its last kWindow copies.
  double best(int way) const noexcept;
  bool prefer_stream() const noexcept { return measured(0) && measured(1) && best(1) * 2 <= best(0); }
  StoreMode mode_;
  double ns_per_kib_[2][kWindow] = {};  // [0] ordinary stores, [1] streaming stores: the last copies
  std::uint32_t copies_[2] = {0, 0};    // copies timed each way
  std::uint32_t since_probe_ = 0;  // large copies since the way not preferred was last tried
};

}  // namespace sparcoll::transport::shm
