// fp16 / bf16 <-> fp32 conversion. Narrowing rounds to nearest even; NaN stays NaN, Inf stays
// Inf; fp32 values beyond the fp16 range become Inf. SIMD (F16C / AVX2 / AVX-512) at run time.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sparcoll::block {

void f16_to_f32(const std::uint16_t* in, float* out, std::size_t n) noexcept;
void f32_to_f16(const float* in, std::uint16_t* out, std::size_t n) noexcept;
void bf16_to_f32(const std::uint16_t* in, float* out, std::size_t n) noexcept;
void f32_to_bf16(const float* in, std::uint16_t* out, std::size_t n) noexcept;

// Scalar forms (tests, tails).
float f16_to_f32(std::uint16_t h) noexcept;
std::uint16_t f32_to_f16(float f) noexcept;
float bf16_to_f32(std::uint16_t h) noexcept;
std::uint16_t f32_to_bf16(float f) noexcept;

}  // namespace sparcoll::block
