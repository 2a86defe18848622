// fp16 / bf16 packing through the block layer's conversion and reduction kernels.
#include "algo/compress/half_pack.hpp"

#include "block/convert.hpp"
#include "block/reduce.hpp"

namespace sparcoll::algo::compress {
namespace {

DataType dtype_of(HalfFormat format) noexcept { return format == HalfFormat::f16 ? DataType::f16 : DataType::bf16; }

}  // namespace

void half_pack(HalfFormat format, const float* values, std::size_t n, std::uint16_t* out) noexcept {
  if (format == HalfFormat::f16)
    block::f32_to_f16(values, out, n);
  else
    block::f32_to_bf16(values, out, n);
}

void half_unpack_add(HalfFormat format, const std::uint16_t* packed, std::size_t n, float* accum) noexcept {
  // acc_reduce(sum) is exactly "widen and add into fp32", SIMD at the dispatched level.
  block::acc_reduce(dtype_of(format), ReduceOp::sum, packed, accum, n);
}

void half_unpack(HalfFormat format, const std::uint16_t* packed, std::size_t n, float* out) noexcept {
  if (format == HalfFormat::f16)
    block::f16_to_f32(packed, out, n);
  else
    block::bf16_to_f32(packed, out, n);
}

}  // namespace sparcoll::algo::compress
