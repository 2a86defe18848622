// Reduction kernels used by aggregators: contributions are widened into an accumulator
// (fp32 for f32/f16/bf16, int32 for i32), combined in a fixed order, then narrowed once.
// Every call is over `n` contiguous elements (one block); the kernels are SIMD (run-time
// dispatch) and allocate nothing.
//
// Semantics: sum adds (i32 wraps modulo 2^32); min/max follow IEEE fminf/fmaxf-like rules
// except that NaN propagates (any NaN contribution gives NaN); avg divides the sum by nranks
// when narrowing. i32 avg is exact: its sum needs more than 32 bits before the division
// (avg(INT32_MAX, INT32_MAX) wrapped to -1), so it has 64-bit kernels of its own (below) and
// truncates toward zero.
#pragma once

#include <cstddef>
#include <cstdint>

#include "sparcoll/types.hpp"

namespace sparcoll::block {

// Bytes of accumulator per element: 4 (fp32 for f32/f16/bf16, int32 for i32), 8 for the 64-bit
// types, which are their own accumulators (f64, i64; scalar kernels: the compiler vectorizes).
constexpr std::size_t acc_size(DataType dt) noexcept { return dtype_is_wide(dt) ? 8 : 4; }

// acc[i] = widen(src[i])
void acc_load(DataType dt, const void* src, void* acc, std::size_t n) noexcept;
// acc[i] = op(acc[i], widen(src[i]))   (avg combines like sum)
void acc_reduce(DataType dt, ReduceOp op, const void* src, void* acc, std::size_t n) noexcept;
// acc[i] = op(acc[i], 0): a contributor whose block is zero (matters for min and max only).
void acc_reduce_zero(DataType dt, ReduceOp op, void* acc, std::size_t n) noexcept;
// acc[i] = 0
void acc_zero(DataType dt, void* acc, std::size_t n) noexcept;
// out[i] = narrow(acc[i]) (avg: acc[i] / nranks first)
void acc_store(DataType dt, ReduceOp op, const void* acc, std::size_t n, std::uint32_t nranks, void* out) noexcept;

// i32 avg, exact for any number of ranks below 2^32: int64 accumulators.
// acc[i] = src[i]; acc[i] += src[i]; out[i] = acc[i] / nranks (truncated toward zero).
void i32_avg_load(const std::int32_t* src, std::int64_t* acc, std::size_t n) noexcept;
void i32_avg_add(const std::int32_t* src, std::int64_t* acc, std::size_t n) noexcept;
void i32_avg_store(const std::int64_t* acc, std::size_t n, std::uint32_t nranks, std::int32_t* out) noexcept;
// The exact average of the int32 sums of the 16-bit halves of n ranks' values (hi: value >> 16,
// lo: value & 0xffff, see i32_split_halves), for algorithms whose messages carry 32-bit sums.
void i32_split_halves(const std::int32_t* in, std::size_t n, std::int32_t* hi, std::int32_t* lo) noexcept;
void i32_avg_from_halves(const std::int32_t* hi_sum, const std::int32_t* lo_sum, std::size_t n, std::uint32_t nranks,
                         std::int32_t* out) noexcept;

}  // namespace sparcoll::block
