// AVX2 kernel for non-zero block scans (the x86-64-v3 baseline: no target attribute needed).
#include <immintrin.h>

#include "block/bitmap_kernels.hpp"

namespace sparcoll::block {

bool any_nonzero_avx2(const unsigned char* p, std::size_t bytes, std::uint32_t mask) noexcept {
  const __m256i m = _mm256_set1_epi32(static_cast<int>(mask));
  std::size_t i = 0;
  // OR four vectors, then one test against the mask: (a|b|c|d) & m == 0 iff every masked
  // word is zero. Testing per 128 bytes lets a non-zero block stop early.
  for (; i + 128 <= bytes; i += 128) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 32));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 64));
    const __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 96));
    const __m256i any = _mm256_or_si256(_mm256_or_si256(a, b), _mm256_or_si256(c, d));
    if (!_mm256_testz_si256(any, m)) return true;
  }
  for (; i + 32 <= bytes; i += 32) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i));
    if (!_mm256_testz_si256(a, m)) return true;
  }
  return any_nonzero_scalar(p + i, bytes - i, mask);
}

}  // namespace sparcoll::block
