// Per-ISA kernels behind bitmap.hpp. Internal to src/block and its tests.
//
// All element types reduce to one question on raw bytes: is any bit of `nonzero_mask` set in
// some 32-bit word of the range? The mask clears the sign bit of every float element (so -0.0
// counts as zero while NaN, Inf and denormals do not), and is all ones for i32. 16-bit
// elements repeat their mask in both halves, so the test holds from any 2-byte-aligned start.
#pragma once

#include <cstddef>
#include <cstdint>

#include "block/simd_level.hpp"
#include "sparcoll/types.hpp"

namespace sparcoll::block {

// Bits of a 32-bit word of `dtype` elements that make the word non-zero.
constexpr std::uint32_t nonzero_mask(DataType dtype) noexcept {
  switch (dtype) {
    case DataType::f32: return 0x7fffffffu;
    case DataType::f16:
    case DataType::bf16: return 0x7fff7fffu;
    case DataType::i32: return 0xffffffffu;
    case DataType::f64:  // never scanned (block-sparse does not take them); any bit counts
    case DataType::i64: return 0xffffffffu;
  }
  return 0;
}

// True when some word in [p, p + bytes) has a bit of `mask` set. `bytes` is a multiple of 2
// (a tail shorter than 4 bytes is tested against the low half of the mask). Called once per
// block: the block loop itself lives in bitmap.cpp.
bool any_nonzero_scalar(const unsigned char* p, std::size_t bytes, std::uint32_t mask) noexcept;
bool any_nonzero_avx2(const unsigned char* p, std::size_t bytes, std::uint32_t mask) noexcept;

// bitmap.hpp's functions at a given level (tests); AVX-512 runs the AVX2 kernel.
std::size_t scan_nonzero_blocks_at(SimdLevel level, const void* data, std::size_t count, DataType dtype,
                                   std::uint32_t block_elems, std::uint64_t* bits,
                                   std::uint64_t* signed_zero_bits = nullptr) noexcept;
bool is_zero_at(SimdLevel level, const void* data, std::size_t n, DataType dtype) noexcept;

}  // namespace sparcoll::block
