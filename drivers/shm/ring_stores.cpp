#include "ring_stores.hpp"

#include <emmintrin.h>

#include <algorithm>
#include <cstring>

namespace sparcoll::transport::shm {

void stream_copy(void* dst, const void* src, std::size_t n) noexcept {
  auto* d = static_cast<std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
  // Streaming stores need 16-byte aligned addresses: the bytes up to the first one, ordinarily.
  const std::size_t head = std::min(n, (16 - (reinterpret_cast<std::uintptr_t>(d) & 15)) & 15);
  std::memcpy(d, s, head);
  d += head;
  s += head;
  n -= head;
  for (; n >= 64; n -= 64, d += 64, s += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 48), e);
  }
  std::memcpy(d, s, n);
}

void stream_fence() noexcept { _mm_sfence(); }

double RingStores::best(int way) const noexcept {
  const std::uint32_t n = std::min(copies_[way], kWindow);
  double b = ns_per_kib_[way][0];
  for (std::uint32_t i = 1; i < n; ++i) b = std::min(b, ns_per_kib_[way][i]);
  return b;
}

void RingStores::record(std::size_t n, bool streamed, std::uint64_t ns) noexcept {
  if (!measures(n)) return;
  const bool probe = streamed != prefer_stream();
  const int way = streamed ? 1 : 0;
  ns_per_kib_[way][copies_[way] % kWindow] = static_cast<double>(ns) * 1024.0 / static_cast<double>(n);
  ++copies_[way];
  if (copies_[way] == 2 * kWindow) copies_[way] = kWindow;  // keeps counting within the window, never wraps
  since_probe_ = probe ? 0 : since_probe_ + 1;
}

}  // namespace sparcoll::transport::shm
