// CPU feature detection, done once, and the SPARCOLL_SIMD cap on what the kernels use.
#include "block/cpu_features.hpp"

#include <cstdlib>
#include <cstring>

#include "block/simd_level.hpp"
#include "common/log.hpp"

namespace sparcoll::block {
namespace {

CpuFeatures detect_hardware() noexcept {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  // __builtin_cpu_supports also checks that the OS saves the YMM/ZMM state (XCR0), which a
  // bare cpuid bit test would miss.
  __builtin_cpu_init();
  f.avx2 = __builtin_cpu_supports("avx2");
  f.f16c = __builtin_cpu_supports("f16c");
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
#endif
  return f;
}

SimdLevel level_of(const CpuFeatures& f) noexcept {
  if (f.avx2 && f.f16c && f.avx512f && f.avx512bw) return SimdLevel::avx512;
  if (f.avx2 && f.f16c) return SimdLevel::avx2;
  return SimdLevel::scalar;
}

const CpuFeatures& hardware() noexcept {
  static const CpuFeatures features = detect_hardware();
  return features;
}

// Applies SPARCOLL_SIMD: a cap, never a promise (asking for avx512 on an AVX2 machine gives avx2).
CpuFeatures apply_cap(CpuFeatures f) noexcept {
  const char* text = std::getenv("SPARCOLL_SIMD");
  if (text == nullptr || *text == '\0') return f;
  SimdLevel cap = SimdLevel::scalar;
  if (!parse_simd_level(text, &cap)) {
    SC_LOG_WARN("SPARCOLL_SIMD=%s is not one of scalar, avx2, avx512; ignored", text);
    return f;
  }
  if (cap < SimdLevel::avx512) f.avx512f = f.avx512bw = false;
  if (cap < SimdLevel::avx2) f.avx2 = f.f16c = false;
  if (level_of(f) < cap)
    SC_LOG_INFO("SPARCOLL_SIMD=%s: this cpu supports only %s", text, simd_level_name(level_of(f)));
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() noexcept {
  static const CpuFeatures features = apply_cap(hardware());
  return features;
}

SimdLevel simd_level() noexcept {
  static const SimdLevel level = level_of(cpu_features());
  return level;
}

bool simd_level_supported(SimdLevel level) noexcept { return level <= level_of(hardware()); }

bool parse_simd_level(const char* text, SimdLevel* out) noexcept {
  for (const SimdLevel level : {SimdLevel::scalar, SimdLevel::avx2, SimdLevel::avx512}) {
    if (std::strcmp(text, simd_level_name(level)) == 0) {
      *out = level;
      return true;
    }
  }
  return false;
}

const char* simd_level_name(SimdLevel level) noexcept {
  switch (level) {
    case SimdLevel::scalar: return "scalar";
    case SimdLevel::avx2: return "avx2";
    case SimdLevel::avx512: return "avx512";
  }
  return "?";
}

}  // namespace sparcoll::block
