// Combining kernels of the 64-bit types (f64, i64), which are their own accumulators: plain
// loops the compiler vectorizes, with the 32-bit kernels' semantics (min/max propagate NaN, the
// accumulator's NaN first; i64 sums and products wrap modulo 2^64).
#include <cstring>

#include "block/reduce_kernels.hpp"

namespace sparcoll::block {
namespace {

inline double min_nan(double a, double b) noexcept { return a != a ? a : (a < b ? a : b); }
inline double max_nan(double a, double b) noexcept { return a != a ? a : (a > b ? a : b); }

void combine_f64(ReduceOp op, const double* src, double* acc, std::size_t n) noexcept {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      for (std::size_t i = 0; i < n; ++i) acc[i] = acc[i] + src[i];
      return;
    case ReduceOp::min:
      for (std::size_t i = 0; i < n; ++i) acc[i] = min_nan(acc[i], src[i]);
      return;
    case ReduceOp::max:
      for (std::size_t i = 0; i < n; ++i) acc[i] = max_nan(acc[i], src[i]);
      return;
    case ReduceOp::product:
      for (std::size_t i = 0; i < n; ++i) acc[i] = acc[i] * src[i];
      return;
    case ReduceOp::band:
    case ReduceOp::bor:
    case ReduceOp::bxor:
      return;  // integers only (the API refuses them on floats)
  }
}

void combine_i64(ReduceOp op, const std::int64_t* src, std::int64_t* acc, std::size_t n) noexcept {
  auto wrap = [](std::uint64_t v) { return static_cast<std::int64_t>(v); };
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      for (std::size_t i = 0; i < n; ++i) acc[i] = wrap(static_cast<std::uint64_t>(acc[i]) + static_cast<std::uint64_t>(src[i]));
      return;
    case ReduceOp::min:
      for (std::size_t i = 0; i < n; ++i) acc[i] = src[i] < acc[i] ? src[i] : acc[i];
      return;
    case ReduceOp::max:
      for (std::size_t i = 0; i < n; ++i) acc[i] = src[i] > acc[i] ? src[i] : acc[i];
      return;
    case ReduceOp::product:
      for (std::size_t i = 0; i < n; ++i) acc[i] = wrap(static_cast<std::uint64_t>(acc[i]) * static_cast<std::uint64_t>(src[i]));
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

void acc_reduce_wide(DataType dt, ReduceOp op, const void* src, void* acc, std::size_t n) noexcept {
  if (dt == DataType::f64)
    combine_f64(op, static_cast<const double*>(src), static_cast<double*>(acc), n);
  else
    combine_i64(op, static_cast<const std::int64_t*>(src), static_cast<std::int64_t*>(acc), n);
}

void acc_reduce_zero_wide(DataType dt, ReduceOp op, void* acc, std::size_t n) noexcept {
  if (zero_is_neutral(op)) return;
  // A zero contribution is all-zero bytes for both types: the combining kernel over a chunk of
  // them, not a kernel call per element.
  constexpr std::size_t kChunk = 256;
  static constexpr std::uint64_t kZeros[kChunk] = {};
  auto* a = static_cast<std::byte*>(acc);
  for (std::size_t i = 0; i < n; i += kChunk)
    acc_reduce_wide(dt, op, kZeros, a + i * 8, n - i < kChunk ? n - i : kChunk);
}

}  // namespace sparcoll::block
