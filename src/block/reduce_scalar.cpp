// Scalar combining kernels: the fallback below AVX2 and the reference the SIMD levels match.
#include <cstring>

#include "block/convert.hpp"
#include "block/reduce_kernels.hpp"

namespace sparcoll::block {
namespace {

// NaN propagates: a NaN accumulator stays; otherwise `a < b` is false for a NaN b, which is then
// taken. Ties (including -0 vs +0) take b, as vminps/vmaxps do.
inline float min_nan(float a, float b) noexcept { return a != a ? a : (a < b ? a : b); }
inline float max_nan(float a, float b) noexcept { return a != a ? a : (a > b ? a : b); }

inline float widen_f32(const void* src, std::size_t i) noexcept {
  float v;
  std::memcpy(&v, static_cast<const unsigned char*>(src) + i * 4, 4);
  return v;
}
inline float widen_f16(const void* src, std::size_t i) noexcept {
  return f16_to_f32(static_cast<const std::uint16_t*>(src)[i]);
}
inline float widen_bf16(const void* src, std::size_t i) noexcept {
  return bf16_to_f32(static_cast<const std::uint16_t*>(src)[i]);
}

template <float (*widen)(const void*, std::size_t) noexcept>
void combine_float(ReduceOp op, const void* src, float* acc, std::size_t n) noexcept {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      for (std::size_t i = 0; i < n; ++i) acc[i] = acc[i] + widen(src, i);
      return;
    case ReduceOp::min:
      for (std::size_t i = 0; i < n; ++i) acc[i] = min_nan(acc[i], widen(src, i));
      return;
    case ReduceOp::max:
      for (std::size_t i = 0; i < n; ++i) acc[i] = max_nan(acc[i], widen(src, i));
      return;
    case ReduceOp::product:
      for (std::size_t i = 0; i < n; ++i) acc[i] = acc[i] * widen(src, i);
      return;
    case ReduceOp::band:
    case ReduceOp::bor:
    case ReduceOp::bxor:
      return;  // integers only (the API refuses them on floats)
  }
}

void combine_int(ReduceOp op, const std::int32_t* src, std::int32_t* acc, std::size_t n) noexcept {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      // Unsigned arithmetic wraps modulo 2^32 without signed-overflow UB.
      for (std::size_t i = 0; i < n; ++i)
        acc[i] = static_cast<std::int32_t>(static_cast<std::uint32_t>(acc[i]) + static_cast<std::uint32_t>(src[i]));
      return;
    case ReduceOp::min:
      for (std::size_t i = 0; i < n; ++i) acc[i] = src[i] < acc[i] ? src[i] : acc[i];
      return;
    case ReduceOp::max:
      for (std::size_t i = 0; i < n; ++i) acc[i] = src[i] > acc[i] ? src[i] : acc[i];
      return;
    case ReduceOp::product:
      for (std::size_t i = 0; i < n; ++i)
        acc[i] = static_cast<std::int32_t>(static_cast<std::uint32_t>(acc[i]) * static_cast<std::uint32_t>(src[i]));
      return;
    case ReduceOp::band:
      for (std::size_t i = 0; i < n; ++i) acc[i] &= src[i];
      return;
    case ReduceOp::bor:
      for (std::size_t i = 0; i < n; ++i) acc[i] |= src[i];
      return;
    case ReduceOp::bxor:
      for (std::size_t i = 0; i < n; ++i) acc[i] ^= src[i];
      return;
  }
}

}  // namespace

void acc_reduce_scalar(DataType dt, ReduceOp op, const void* src, void* acc, std::size_t n) noexcept {
  auto* facc = static_cast<float*>(acc);
  switch (dt) {
    case DataType::f32: return combine_float<widen_f32>(op, src, facc, n);
    case DataType::f16: return combine_float<widen_f16>(op, src, facc, n);
    case DataType::bf16: return combine_float<widen_bf16>(op, src, facc, n);
    case DataType::i32:
      return combine_int(op, static_cast<const std::int32_t*>(src), static_cast<std::int32_t*>(acc), n);
    case DataType::f64:
    case DataType::i64: return acc_reduce_wide(dt, op, src, acc, n);
  }
}

void acc_reduce_zero_scalar(DataType dt, ReduceOp op, void* acc, std::size_t n) noexcept {
  if (op == ReduceOp::product || op == ReduceOp::band) {
    // x * 0: 0 with x's sign for floats, NaN for NaN and infinities (IEEE, as the kernels
    // above); x & 0: 0.
    if (dt == DataType::i32) {
      if (n != 0) std::memset(acc, 0, n * 4);
      return;
    }
    auto* facc = static_cast<float*>(acc);
    for (std::size_t i = 0; i < n; ++i) facc[i] = facc[i] * 0.0f;
    return;
  }
  if (op != ReduceOp::min && op != ReduceOp::max) return;
  if (dt == DataType::i32) {
    auto* iacc = static_cast<std::int32_t*>(acc);
    for (std::size_t i = 0; i < n; ++i) iacc[i] = op == ReduceOp::min ? (iacc[i] < 0 ? iacc[i] : 0) : (iacc[i] > 0 ? iacc[i] : 0);
    return;
  }
  auto* facc = static_cast<float*>(acc);
  for (std::size_t i = 0; i < n; ++i) facc[i] = op == ReduceOp::min ? min_nan(facc[i], 0.0f) : max_nan(facc[i], 0.0f);
}

}  // namespace sparcoll::block
