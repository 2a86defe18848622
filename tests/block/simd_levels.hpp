// Test helper: the SIMD levels this machine can run, so every kernel is checked at each of them.
#pragma once

#include <vector>

#include "block/simd_level.hpp"

namespace sparcoll::block::test {

inline std::vector<SimdLevel> runnable_levels() {
  std::vector<SimdLevel> levels;
  for (const SimdLevel level : {SimdLevel::scalar, SimdLevel::avx2, SimdLevel::avx512})
    if (simd_level_supported(level)) levels.push_back(level);
  return levels;
}

}  // namespace sparcoll::block::test
