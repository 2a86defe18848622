// AVX2 + F16C combining kernels (the x86-64-v3 baseline). A tail shorter than a vector runs the
// body's instructions on zero-padded stack copies (16-bit sources have no masked load in AVX2)
// or under vmaskmov masks (32-bit data).
#include <immintrin.h>

#include <cstring>

#include "block/reduce_kernels.hpp"

namespace sparcoll::block {
namespace {

constexpr std::size_t kLanes = 8;

// Sources: 8 elements widened to fp32.
struct SrcF32 {
  static constexpr std::size_t kBytes = 4;
  static __m256 load(const unsigned char* p) noexcept { return _mm256_loadu_ps(reinterpret_cast<const float*>(p)); }
};
struct SrcF16 {
  static constexpr std::size_t kBytes = 2;
  static __m256 load(const unsigned char* p) noexcept {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
};
struct SrcBF16 {
  static constexpr std::size_t kBytes = 2;
  static __m256 load(const unsigned char* p) noexcept {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
};

// Operators on (accumulator, contribution).
struct AddF {
  static __m256 apply(__m256 a, __m256 b) noexcept { return _mm256_add_ps(a, b); }
};
// vminps returns b unless a < b (so a NaN b wins); the blend keeps a NaN a.
struct MinF {
  static __m256 apply(__m256 a, __m256 b) noexcept {
    return _mm256_blendv_ps(_mm256_min_ps(a, b), a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
  }
};
struct MaxF {
  static __m256 apply(__m256 a, __m256 b) noexcept {
    return _mm256_blendv_ps(_mm256_max_ps(a, b), a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
  }
};
struct MulF {
  static __m256 apply(__m256 a, __m256 b) noexcept { return _mm256_mul_ps(a, b); }
};
struct AddI {
  static __m256i apply(__m256i a, __m256i b) noexcept { return _mm256_add_epi32(a, b); }  // wraps
};
struct MulI {
  static __m256i apply(__m256i a, __m256i b) noexcept { return _mm256_mullo_epi32(a, b); }  // low 32 bits: wraps
};
struct AndI {
  static __m256i apply(__m256i a, __m256i b) noexcept { return _mm256_and_si256(a, b); }
};
struct OrI {
  static __m256i apply(__m256i a, __m256i b) noexcept { return _mm256_or_si256(a, b); }
};
struct XorI {
  static __m256i apply(__m256i a, __m256i b) noexcept { return _mm256_xor_si256(a, b); }
};
struct MinI {
  static __m256i apply(__m256i a, __m256i b) noexcept { return _mm256_min_epi32(a, b); }
};
struct MaxI {
  static __m256i apply(__m256i a, __m256i b) noexcept { return _mm256_max_epi32(a, b); }
};

template <class Src, class Op>
void combine(const unsigned char* src, float* acc, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    _mm256_storeu_ps(acc + i, Op::apply(_mm256_loadu_ps(acc + i), Src::load(src + i * Src::kBytes)));
  if (i == n) return;
  const std::size_t left = n - i;
  unsigned char src_tail[kLanes * Src::kBytes] = {};
  float acc_tail[kLanes] = {};
  std::memcpy(src_tail, src + i * Src::kBytes, left * Src::kBytes);
  std::memcpy(acc_tail, acc + i, left * sizeof(float));
  _mm256_storeu_ps(acc_tail, Op::apply(_mm256_loadu_ps(acc_tail), Src::load(src_tail)));
  std::memcpy(acc + i, acc_tail, left * sizeof(float));
}

// Lanes [0, left) of a vector of 32-bit lanes, for vmaskmov (masked-off lanes are not touched).
inline __m256i tail_mask(std::size_t left) noexcept {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(left)), lane);
}

template <class Op>
void combine_int(const std::int32_t* src, std::int32_t* acc, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + i));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc + i), Op::apply(a, b));
  }
  if (i == n) return;
  const __m256i mask = tail_mask(n - i);
  _mm256_maskstore_epi32(acc + i, mask, Op::apply(_mm256_maskload_epi32(acc + i, mask), _mm256_maskload_epi32(src + i, mask)));
}

template <class Op>
void combine_zero(float* acc, std::size_t n) noexcept {
  const __m256 zero = _mm256_setzero_ps();
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) _mm256_storeu_ps(acc + i, Op::apply(_mm256_loadu_ps(acc + i), zero));
  if (i == n) return;
  const __m256i mask = tail_mask(n - i);
  _mm256_maskstore_ps(acc + i, mask, Op::apply(_mm256_maskload_ps(acc + i, mask), zero));
}

template <class Op>
void combine_zero_int(std::int32_t* acc, std::size_t n) noexcept {
  const __m256i zero = _mm256_setzero_si256();
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    auto* p = reinterpret_cast<__m256i*>(acc + i);
    _mm256_storeu_si256(p, Op::apply(_mm256_loadu_si256(p), zero));
  }
  if (i == n) return;
  const __m256i mask = tail_mask(n - i);
  _mm256_maskstore_epi32(acc + i, mask, Op::apply(_mm256_maskload_epi32(acc + i, mask), zero));
}

template <class Src>
void combine_float(ReduceOp op, const void* src, void* acc, std::size_t n) noexcept {
  const auto* s = static_cast<const unsigned char*>(src);
  auto* a = static_cast<float*>(acc);
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return combine<Src, AddF>(s, a, n);
    case ReduceOp::min: return combine<Src, MinF>(s, a, n);
    case ReduceOp::max: return combine<Src, MaxF>(s, a, n);
    case ReduceOp::product: return combine<Src, MulF>(s, a, n);
    case ReduceOp::band:
    case ReduceOp::bor:
    case ReduceOp::bxor: return;  // integers only (the API refuses them on floats)
  }
}

}  // namespace

void acc_reduce_avx2(DataType dt, ReduceOp op, const void* src, void* acc, std::size_t n) noexcept {
  switch (dt) {
    case DataType::f32: return combine_float<SrcF32>(op, src, acc, n);
    case DataType::f16: return combine_float<SrcF16>(op, src, acc, n);
    case DataType::f64:
    case DataType::i64: return acc_reduce_wide(dt, op, src, acc, n);
    case DataType::bf16: return combine_float<SrcBF16>(op, src, acc, n);
    case DataType::i32: {
      const auto* s = static_cast<const std::int32_t*>(src);
      auto* a = static_cast<std::int32_t*>(acc);
      switch (op) {
        case ReduceOp::sum:
        case ReduceOp::avg: return combine_int<AddI>(s, a, n);
        case ReduceOp::min: return combine_int<MinI>(s, a, n);
        case ReduceOp::max: return combine_int<MaxI>(s, a, n);
        case ReduceOp::product: return combine_int<MulI>(s, a, n);
        case ReduceOp::band: return combine_int<AndI>(s, a, n);
        case ReduceOp::bor: return combine_int<OrI>(s, a, n);
        case ReduceOp::bxor: return combine_int<XorI>(s, a, n);
      }
      return;
    }
  }
}

void acc_reduce_zero_avx2(DataType dt, ReduceOp op, void* acc, std::size_t n) noexcept {
  if (dt == DataType::i32) {
    auto* a = static_cast<std::int32_t*>(acc);
    if (op == ReduceOp::min) combine_zero_int<MinI>(a, n);
    if (op == ReduceOp::max) combine_zero_int<MaxI>(a, n);
    if (op == ReduceOp::product) combine_zero_int<MulI>(a, n);
    if (op == ReduceOp::band) combine_zero_int<AndI>(a, n);
    return;
  }
  auto* a = static_cast<float*>(acc);
  if (op == ReduceOp::min) combine_zero<MinF>(a, n);
  if (op == ReduceOp::max) combine_zero<MaxF>(a, n);
  if (op == ReduceOp::product) combine_zero<MulF>(a, n);
}

}  // namespace sparcoll::block
