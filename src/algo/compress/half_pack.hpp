// fp16 / bf16 packing of a value array (the values of a sparse selection, or a dense chunk):
// half the bytes of fp32 on the wire, decoded by adding into an fp32 accumulator, which is what
// a reduction needs. Thin over the block layer's kernels (src/block/convert.hpp for narrowing,
// src/block/reduce.hpp for widen-and-add), so the rounding is the library's one rule: nearest
// even, NaN stays NaN, fp32 beyond the fp16 range becomes Inf (bf16 keeps fp32's range).
#pragma once

#include <cstddef>
#include <cstdint>

namespace sparcoll::algo::compress {

enum class HalfFormat : std::uint8_t { f16, bf16 };

// out[i] = narrow(values[i]), i < n. SIMD; allocates nothing.
void half_pack(HalfFormat format, const float* values, std::size_t n, std::uint16_t* out) noexcept;
// accum[i] += widen(packed[i]), i < n (in fp32). SIMD; allocates nothing.
void half_unpack_add(HalfFormat format, const std::uint16_t* packed, std::size_t n, float* accum) noexcept;
// out[i] = widen(packed[i]).
void half_unpack(HalfFormat format, const std::uint16_t* packed, std::size_t n, float* out) noexcept;

}  // namespace sparcoll::algo::compress
