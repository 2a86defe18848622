// Per-ISA kernels behind convert.hpp. Internal to src/block and its tests.
//
// Every level gives bit-identical results: the scalar forms in convert.hpp are the reference
// (round to nearest even; a NaN narrows to a quiet NaN of the same sign keeping its top payload
// bits; fp16 overflow gives Inf), and the tests check each level against them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "block/simd_level.hpp"

namespace sparcoll::block {

void f16_to_f32_scalar(const std::uint16_t* in, float* out, std::size_t n) noexcept;
void f32_to_f16_scalar(const float* in, std::uint16_t* out, std::size_t n) noexcept;
void bf16_to_f32_scalar(const std::uint16_t* in, float* out, std::size_t n) noexcept;
void f32_to_bf16_scalar(const float* in, std::uint16_t* out, std::size_t n) noexcept;

void f16_to_f32_avx2(const std::uint16_t* in, float* out, std::size_t n) noexcept;
void f32_to_f16_avx2(const float* in, std::uint16_t* out, std::size_t n) noexcept;
void bf16_to_f32_avx2(const std::uint16_t* in, float* out, std::size_t n) noexcept;
void f32_to_bf16_avx2(const float* in, std::uint16_t* out, std::size_t n) noexcept;

void f16_to_f32_avx512(const std::uint16_t* in, float* out, std::size_t n) noexcept;
void f32_to_f16_avx512(const float* in, std::uint16_t* out, std::size_t n) noexcept;
void bf16_to_f32_avx512(const std::uint16_t* in, float* out, std::size_t n) noexcept;
void f32_to_bf16_avx512(const float* in, std::uint16_t* out, std::size_t n) noexcept;

// convert.hpp's array functions at a given level (tests, and the reduction kernels).
void f16_to_f32_at(SimdLevel level, const std::uint16_t* in, float* out, std::size_t n) noexcept;
void f32_to_f16_at(SimdLevel level, const float* in, std::uint16_t* out, std::size_t n) noexcept;
void bf16_to_f32_at(SimdLevel level, const std::uint16_t* in, float* out, std::size_t n) noexcept;
void f32_to_bf16_at(SimdLevel level, const float* in, std::uint16_t* out, std::size_t n) noexcept;

}  // namespace sparcoll::block
