// Per-ISA kernels behind reduce.hpp. Internal to src/block and its tests.
//
// Only the combining step has hand-written SIMD per level; loading and storing are conversions
// (convert_kernels.hpp) or copies. Every level gives the same bits: min/max are
// `isnan(a) ? a : (a < b ? a : b)` (resp. `>`) with a the accumulator, which is what
// vminps/vmaxps plus a NaN blend compute; sums add in the same order at every level.
#pragma once

#include <cstddef>
#include <cstdint>

#include "block/simd_level.hpp"
#include "sparcoll/types.hpp"

namespace sparcoll::block {

// acc[i] = op(acc[i], widen(src[i])); avg combines like sum.
void acc_reduce_scalar(DataType dt, ReduceOp op, const void* src, void* acc, std::size_t n) noexcept;
void acc_reduce_avx2(DataType dt, ReduceOp op, const void* src, void* acc, std::size_t n) noexcept;
void acc_reduce_avx512(DataType dt, ReduceOp op, const void* src, void* acc, std::size_t n) noexcept;

// The 64-bit types (f64, i64), every level: reduce_wide.cpp.
void acc_reduce_wide(DataType dt, ReduceOp op, const void* src, void* acc, std::size_t n) noexcept;
void acc_reduce_zero_wide(DataType dt, ReduceOp op, void* acc, std::size_t n) noexcept;

// acc[i] = op(acc[i], 0); a no-op for sum and avg.
void acc_reduce_zero_scalar(DataType dt, ReduceOp op, void* acc, std::size_t n) noexcept;
void acc_reduce_zero_avx2(DataType dt, ReduceOp op, void* acc, std::size_t n) noexcept;
void acc_reduce_zero_avx512(DataType dt, ReduceOp op, void* acc, std::size_t n) noexcept;

// reduce.hpp's functions at a given level (tests).
void acc_load_at(SimdLevel level, DataType dt, const void* src, void* acc, std::size_t n) noexcept;
void acc_reduce_at(SimdLevel level, DataType dt, ReduceOp op, const void* src, void* acc, std::size_t n) noexcept;
void acc_reduce_zero_at(SimdLevel level, DataType dt, ReduceOp op, void* acc, std::size_t n) noexcept;
void acc_store_at(SimdLevel level, DataType dt, ReduceOp op, const void* acc, std::size_t n, std::uint32_t nranks,
                  void* out) noexcept;

}  // namespace sparcoll::block
