// What the fuzz targets share. A broken invariant aborts with its file, line and condition, so
// libFuzzer keeps the input as a crash like any sanitizer report. Inputs are copied into a heap
// buffer of exactly their size: AddressSanitizer then reports a parser that reads one byte past
// the message, which it would not inside a larger buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

namespace sparcoll::fuzz {

[[noreturn]] inline void invariant_failed(const char* file, int line, const char* condition) {
  std::fprintf(stderr, "fuzz: invariant broken at %s:%d: %s\n", file, line, condition);
  std::abort();
}

#define FUZZ_CHECK(condition) \
  ((condition) ? static_cast<void>(0) : ::sparcoll::fuzz::invariant_failed(__FILE__, __LINE__, #condition))

// A copy of the input in its own allocation of exactly `size` bytes, aligned to `alignment`
// (16 by default: every transport aligns received messages to at least 8; a mapped segment is
// page aligned).
class ExactCopy {
 public:
  ExactCopy(const void* data, std::size_t size, std::size_t alignment = 16)
      : bytes_(static_cast<std::byte*>(::operator new[](size, std::align_val_t{alignment})), Free{alignment}),
        size_(size) {
    if (size > 0) std::memcpy(bytes_.get(), data, size);
  }
  std::byte* data() const { return bytes_.get(); }
  std::size_t size() const { return size_; }

 private:
  struct Free {
    std::size_t alignment;
    void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t{alignment}); }
  };
  std::unique_ptr<std::byte[], Free> bytes_;
  std::size_t size_;
};

// Reads every byte of [data, data + size): a view that a parser returned must lie inside the
// message, and AddressSanitizer checks each read. The sum keeps the reads from being optimised away.
inline volatile unsigned touch_sink = 0;
inline void touch(const void* data, std::size_t size) {
  const auto* p = static_cast<const volatile unsigned char*>(data);
  unsigned sum = 0;
  for (std::size_t i = 0; i < size; ++i) sum += p[i];
  touch_sink = sum;
}

}  // namespace sparcoll::fuzz
