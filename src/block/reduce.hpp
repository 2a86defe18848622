// Reduction kernels used by aggregators: contributions are widened into an accumulator
// (fp32 for f32/f16/bf16, int32 for i32), combined in a fixed order, then narrowed once.
// Every call is over `n` contiguous elements (one block); the kernels are SIMD (run-time
// dispatch) and allocate nothing.
//
// Semantics: sum/avg add (i32 wraps modulo 2^32); min/max follow IEEE fminf/fmaxf-like rules
// except that NaN propagates (any NaN contribution gives NaN); avg divides the sum by nranks
// when narrowing (i32: truncation toward zero).
#pragma once

#include <cstddef>
#include <cstdint>

#include "sparcoll/types.hpp"

namespace sparcoll::block {

// Bytes of accumulator per element (4 for every dtype supported now).
constexpr std::size_t acc_size(DataType) noexcept { return 4; }

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

}  // namespace sparcoll::block
