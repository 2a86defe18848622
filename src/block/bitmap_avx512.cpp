// AVX-512 kernel for non-zero block scans; only called when cpu_features() reports AVX-512F/BW.
#include <immintrin.h>

#include "block/bitmap_kernels.hpp"

namespace sparcoll::block {

__attribute__((target("avx512f,avx512bw"))) bool any_nonzero_avx512(const unsigned char* p, std::size_t bytes,
                                                                     std::uint32_t mask) noexcept {
  const __m512i m = _mm512_set1_epi32(static_cast<int>(mask));
  std::size_t i = 0;
  // Same OR-then-test scheme as the AVX2 kernel, 256 bytes per test.
  for (; i + 256 <= bytes; i += 256) {
    const __m512i a = _mm512_loadu_si512(p + i);
    const __m512i b = _mm512_loadu_si512(p + i + 64);
    const __m512i c = _mm512_loadu_si512(p + i + 128);
    const __m512i d = _mm512_loadu_si512(p + i + 192);
    const __m512i any = _mm512_or_si512(_mm512_or_si512(a, b), _mm512_or_si512(c, d));
    if (_mm512_test_epi32_mask(any, m)) return true;
  }
  for (; i + 64 <= bytes; i += 64)
    if (_mm512_test_epi32_mask(_mm512_loadu_si512(p + i), m)) return true;
  // The tail (< 64 bytes) through a byte-masked load (AVX-512BW): masked-off bytes read as zero
  // and never fault, so no scalar loop is needed.
  const __mmask64 k = (std::uint64_t{1} << (bytes - i)) - 1;
  return _mm512_test_epi32_mask(_mm512_maskz_loadu_epi8(k, p + i), m) != 0;
}

}  // namespace sparcoll::block
