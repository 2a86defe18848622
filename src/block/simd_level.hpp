// Which SIMD kernels the block layer runs. Internal to src/block and its tests.
//
// Every kernel exists at three levels; the public entry points (bitmap.hpp, convert.hpp,
// reduce.hpp) run simd_level(), the `_at(level, ...)` forms in the *_kernels.hpp headers run a
// given level so tests can check each one against the scalar code on any machine.
#pragma once

#include <cstdint>

namespace sparcoll::block {

enum class SimdLevel : std::uint8_t {
  scalar = 0,  // plain C++ (still compiled for x86-64-v3, so the compiler may vectorize it)
  avx2 = 1,    // AVX2 + F16C: the x86-64-v3 baseline, what the Soft-RoCE VM runs
  avx512 = 2,  // AVX-512F + AVX-512BW, selected only when the CPU has them
};

// The level in use: the best this CPU supports, capped by SPARCOLL_SIMD. Fixed for the process.
SimdLevel simd_level() noexcept;

// Whether this CPU can run `level` at all (ignores SPARCOLL_SIMD; tests use it to skip).
bool simd_level_supported(SimdLevel level) noexcept;

const char* simd_level_name(SimdLevel level) noexcept;

// Parses a SPARCOLL_SIMD value ("scalar", "avx2", "avx512"); false for anything else.
bool parse_simd_level(const char* text, SimdLevel* out) noexcept;

}  // namespace sparcoll::block
