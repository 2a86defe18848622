// Run-time CPU feature detection for SIMD dispatch. The library is built for x86-64-v3
// (AVX2, FMA, F16C); AVX-512 paths are used only where the CPU has them.
#pragma once

namespace sparcoll::block {

struct CpuFeatures {
  bool avx2 = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
};

// Detected once; SPARCOLL_SIMD=avx2|scalar caps what is used (tests and benchmarks).
const CpuFeatures& cpu_features() noexcept;

}  // namespace sparcoll::block
