#include "common/frame_arena.hpp"

namespace sparcoll {

FrameArena& FrameArena::local() {
  thread_local FrameArena arena;
  return arena;
}

void* FrameArena::allocate(std::size_t bytes) {
  const std::size_t need = rounded(bytes);
  // The top chunk, else the next kept one with room, else a new one (the one place this
  // allocates: a thread's first collectives, or a deeper nesting than before).
  while (!chunks_.empty() && chunks_[top_].size - chunks_[top_].used < need && top_ + 1 < chunks_.size() &&
         chunks_[top_ + 1].size >= need) {
    ++top_;
    chunks_[top_].used = 0;
  }
  if (chunks_.empty() || chunks_[top_].size - chunks_[top_].used < need) {
    Chunk c;
    c.size = need > kChunkBytes ? need : kChunkBytes;
    c.bytes = std::make_unique<std::byte[]>(c.size);
    // A new chunk goes right above the top: kept chunks above it were too small.
    const std::size_t at = chunks_.empty() ? 0 : top_ + 1;
    chunks_.insert(chunks_.begin() + static_cast<std::ptrdiff_t>(at), std::move(c));
    top_ = at;
  }
  Chunk& c = chunks_[top_];
  void* frame = c.bytes.get() + c.used;
  c.used += need;
  ++live_;
  return frame;
}

void FrameArena::release(void* frame, std::size_t bytes) noexcept {
  --live_;
  if (live_ == 0) {
    for (Chunk& c : chunks_) c.used = 0;
    top_ = 0;
    return;
  }
  Chunk& c = chunks_[top_];
  const std::size_t need = rounded(bytes);
  if (c.used >= need && static_cast<std::byte*>(frame) == c.bytes.get() + c.used - need) {
    c.used -= need;
    if (c.used == 0 && top_ > 0) --top_;  // the chunk below holds the caller's frames
  }
}

std::size_t FrameArena::reserved_bytes() const noexcept {
  std::size_t total = 0;
  for (const Chunk& c : chunks_) total += c.size;
  return total;
}

}  // namespace sparcoll
