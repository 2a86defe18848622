// Where the frames of collective coroutines (common/task.hpp) live: one arena per thread, so a
// collective allocates no memory once its thread has run it before.
//
// Frames come and go in stack order (a coroutine's frame is freed when the call that awaited
// it returns), so the arena is a stack of chunks: allocation bumps the top, and freeing the
// top frame pops it. A frame freed out of that order is only counted; its room comes back
// when the thread's last live frame is freed, at the end of its collective. Chunks are kept
// for reuse, so the arena grows to a thread's deepest nesting of frames and no further.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace sparcoll {

class FrameArena {
 public:
  // The calling thread's arena.
  static FrameArena& local();

  void* allocate(std::size_t bytes);
  void release(void* frame, std::size_t bytes) noexcept;

  // Frames not freed yet, and the chunks' bytes (tests).
  std::size_t live_frames() const noexcept { return live_; }
  std::size_t reserved_bytes() const noexcept;

 private:
  static constexpr std::size_t kChunkBytes = 64 * 1024;
  static constexpr std::size_t kAlign = alignof(std::max_align_t);
  struct Chunk {
    std::unique_ptr<std::byte[]> bytes;
    std::size_t size = 0;
    std::size_t used = 0;
  };
  static std::size_t rounded(std::size_t bytes) noexcept { return (bytes + kAlign - 1) & ~(kAlign - 1); }

  std::vector<Chunk> chunks_;
  std::size_t top_ = 0;   // the chunk allocations bump (valid when chunks_ is not empty)
  std::size_t live_ = 0;  // frames allocated and not freed
};

}  // namespace sparcoll
