// Non-zero block bitmaps: which blocks of a tensor a worker has to send.
//
// A block is non-zero when any of its elements is non-zero. NaN and Inf are non-zero; -0.0 is
// zero (floats are tested on their bits with the sign masked off). The last block may be short
// (count % block_elems elements).
#pragma once

#include <cstddef>
#include <cstdint>

#include "block/simd_level.hpp"
#include "sparcoll/types.hpp"

namespace sparcoll::block {

constexpr std::size_t block_count(std::size_t count, std::uint32_t block_elems) noexcept {
  return (count + block_elems - 1) / block_elems;
}
constexpr std::size_t bitmap_words(std::size_t nblocks) noexcept { return (nblocks + 63) / 64; }

// Writes bitmap_words(nblocks) words to `bits` (bit i of word i/64 = block i non-zero; unused
// high bits of the last word are zero) and returns the number of non-zero blocks. SIMD (AVX2
// when the cpu has it, chosen at run time); large tensors are split over TBB worker threads.
// With `signed_zero_bits` (same size), also marks the zero blocks that hold a -0.0 (floats).
std::size_t scan_nonzero_blocks(const void* data, std::size_t count, DataType dtype, std::uint32_t block_elems,
                                std::uint64_t* bits, std::uint64_t* signed_zero_bits = nullptr);

// The threads a large scan is split over in this process, the caller's included; 1: the caller
// alone. By default every core. A communicator sets it to its host's cores over the processes
// it runs there (at least 1; the last communicator set up decides): processes sharing a host
// would otherwise each split their scans over every core: 2 and 4 ranks on 2 cores took 5-8%
// longer that way than on one thread each (docs/perf-log.md, "The scan's threads").
void set_scan_threads(unsigned threads) noexcept;
unsigned scan_threads() noexcept;

// True when the `n` elements at `data` are all zero (same rule as above).
bool is_zero(const void* data, std::size_t n, DataType dtype);

// The SIMD level the two functions above use: simd_level(), but at most AVX2 (the scan is bound
// by memory; bitmap.cpp says why).
SimdLevel scan_simd_level() noexcept;

inline bool test_bit(const std::uint64_t* bits, std::size_t i) noexcept { return (bits[i >> 6] >> (i & 63)) & 1u; }

// The smallest set block index b >= from with b % stride == from % stride, or `end` if none
// below `end`. (A lane walks blocks from, from+stride, ...)
inline std::size_t next_in_lane(const std::uint64_t* bits, std::size_t from, std::size_t stride, std::size_t end) noexcept {
  for (std::size_t b = from; b < end; b += stride)
    if (test_bit(bits, b)) return b;
  return end;
}

}  // namespace sparcoll::block
