// AVX-512F/BW combining kernels; only called when cpu_features() reports both. Every helper
// carries the target attribute so the compiler can inline it into the kernels; the tail runs
// under a lane mask (masked-off lanes are neither read nor written).
// GCC 12 reports its own _mm512_undefined_*() placeholders as "may be used uninitialized" when
// AVX-512 intrinsics are inlined into target("avx512f") functions (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include "block/reduce_kernels.hpp"

#define SPARCOLL_AVX512 __attribute__((target("avx512f,avx512bw")))

namespace sparcoll::block {
namespace {

constexpr std::size_t kLanes = 16;
constexpr __mmask16 kAll = 0xffff;

SPARCOLL_AVX512 inline __mmask16 lanes(std::size_t left) noexcept {
  return left >= kLanes ? kAll : static_cast<__mmask16>((1u << left) - 1);
}

// 16 half-width values: a plain load for a full vector (kFull), a masked one for the tail
// (AVX-512BW, 512-bit form).
template <bool kFull>
SPARCOLL_AVX512 inline __m256i load_u16x16(const unsigned char* p, __mmask16 k) noexcept {
  if constexpr (kFull) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_si256(_mm512_maskz_loadu_epi16(static_cast<__mmask32>(k), p));
}

// Sources: 16 elements widened to fp32, whole (kFull) or the tail's under `k`.
struct SrcF32 {
  static constexpr std::size_t kBytes = 4;
  template <bool kFull>
  SPARCOLL_AVX512 static __m512 load(const unsigned char* p, __mmask16 k) noexcept {
    if constexpr (kFull) return _mm512_loadu_ps(p);
    return _mm512_maskz_loadu_ps(k, p);
  }
};
struct SrcF16 {
  static constexpr std::size_t kBytes = 2;
  template <bool kFull>
  SPARCOLL_AVX512 static __m512 load(const unsigned char* p, __mmask16 k) noexcept {
    return _mm512_cvtph_ps(load_u16x16<kFull>(p, k));
  }
};
struct SrcBF16 {
  static constexpr std::size_t kBytes = 2;
  template <bool kFull>
  SPARCOLL_AVX512 static __m512 load(const unsigned char* p, __mmask16 k) noexcept {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(load_u16x16<kFull>(p, k)), 16));
  }
};

// Operators on (accumulator, contribution); min/max as in the AVX2 kernels.
struct AddF {
  SPARCOLL_AVX512 static __m512 apply(__m512 a, __m512 b) noexcept { return _mm512_add_ps(a, b); }
};
struct MinF {
  SPARCOLL_AVX512 static __m512 apply(__m512 a, __m512 b) noexcept {
    return _mm512_mask_mov_ps(_mm512_min_ps(a, b), _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), a);
  }
};
struct MaxF {
  SPARCOLL_AVX512 static __m512 apply(__m512 a, __m512 b) noexcept {
    return _mm512_mask_mov_ps(_mm512_max_ps(a, b), _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), a);
  }
};
struct MulF {
  SPARCOLL_AVX512 static __m512 apply(__m512 a, __m512 b) noexcept { return _mm512_mul_ps(a, b); }
};
struct AddI {
  SPARCOLL_AVX512 static __m512i apply(__m512i a, __m512i b) noexcept { return _mm512_add_epi32(a, b); }  // wraps
};
struct MulI {
  SPARCOLL_AVX512 static __m512i apply(__m512i a, __m512i b) noexcept { return _mm512_mullo_epi32(a, b); }  // wraps
};
struct AndI {
  SPARCOLL_AVX512 static __m512i apply(__m512i a, __m512i b) noexcept { return _mm512_and_si512(a, b); }
};
struct OrI {
  SPARCOLL_AVX512 static __m512i apply(__m512i a, __m512i b) noexcept { return _mm512_or_si512(a, b); }
};
struct XorI {
  SPARCOLL_AVX512 static __m512i apply(__m512i a, __m512i b) noexcept { return _mm512_xor_si512(a, b); }
};
struct MinI {
  SPARCOLL_AVX512 static __m512i apply(__m512i a, __m512i b) noexcept { return _mm512_min_epi32(a, b); }
};
struct MaxI {
  SPARCOLL_AVX512 static __m512i apply(__m512i a, __m512i b) noexcept { return _mm512_max_epi32(a, b); }
};

// Each kernel runs full vectors with plain loads and stores, and only its tail (< 16 lanes)
// under a mask: masked ones for every vector made the bf16 kernel 3x slower than AVX2's on this
// project's host (AMD EPYC: 3.7 against 11 GB/s of bf16 read, 100 MiB, one core; docs/perf-log.md,
// "The kernels' loads and stores").
template <class Src, class Op>
SPARCOLL_AVX512 void combine(const unsigned char* src, float* acc, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    _mm512_storeu_ps(acc + i, Op::apply(_mm512_loadu_ps(acc + i), Src::template load<true>(src + i * Src::kBytes, kAll)));
  if (i == n) return;
  const __mmask16 k = lanes(n - i);
  _mm512_mask_storeu_ps(acc + i, k,
                        Op::apply(_mm512_maskz_loadu_ps(k, acc + i), Src::template load<false>(src + i * Src::kBytes, k)));
}

template <class Op>
SPARCOLL_AVX512 void combine_int(const std::int32_t* src, std::int32_t* acc, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const __m512i a = _mm512_loadu_si512(acc + i);
    _mm512_storeu_si512(acc + i, Op::apply(a, _mm512_loadu_si512(src + i)));
  }
  if (i == n) return;
  const __mmask16 k = lanes(n - i);
  const __m512i a = _mm512_maskz_loadu_epi32(k, acc + i);
  _mm512_mask_storeu_epi32(acc + i, k, Op::apply(a, _mm512_maskz_loadu_epi32(k, src + i)));
}

template <class Op>
SPARCOLL_AVX512 void combine_zero(float* acc, std::size_t n) noexcept {
  const __m512 zero = _mm512_setzero_ps();
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) _mm512_storeu_ps(acc + i, Op::apply(_mm512_loadu_ps(acc + i), zero));
  if (i == n) return;
  const __mmask16 k = lanes(n - i);
  _mm512_mask_storeu_ps(acc + i, k, Op::apply(_mm512_maskz_loadu_ps(k, acc + i), zero));
}

template <class Op>
SPARCOLL_AVX512 void combine_zero_int(std::int32_t* acc, std::size_t n) noexcept {
  const __m512i zero = _mm512_setzero_si512();
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) _mm512_storeu_si512(acc + i, Op::apply(_mm512_loadu_si512(acc + i), zero));
  if (i == n) return;
  const __mmask16 k = lanes(n - i);
  _mm512_mask_storeu_epi32(acc + i, k, Op::apply(_mm512_maskz_loadu_epi32(k, acc + i), zero));
}

template <class Src>
SPARCOLL_AVX512 void combine_float(ReduceOp op, const void* src, void* acc, std::size_t n) noexcept {
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

SPARCOLL_AVX512 void acc_reduce_avx512(DataType dt, ReduceOp op, const void* src, void* acc, std::size_t n) noexcept {
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

SPARCOLL_AVX512 void acc_reduce_zero_avx512(DataType dt, ReduceOp op, void* acc, std::size_t n) noexcept {
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

#undef SPARCOLL_AVX512
