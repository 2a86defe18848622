// Threshold selection: argument checks, the scalar kernel and the run-time dispatch.
#include "algo/compress/select_above.hpp"

#include <cmath>
#include <limits>
#include <string>

#include "algo/compress/select_above_kernels.hpp"

namespace sparcoll::algo::compress {
namespace {

Status check(const char* who, const float* values, std::size_t n, float threshold) {
  if (std::isnan(threshold)) return Status(ErrorCode::invalid_argument, std::string(who) + ": threshold is nan");
  if (threshold < 0.0f)
    return Status(ErrorCode::invalid_argument,
                  std::string(who) + ": threshold " + std::to_string(threshold) + " is negative (it bounds a magnitude)");
  if (n > std::numeric_limits<std::uint32_t>::max())
    return Status(ErrorCode::invalid_argument, std::string(who) + ": " + std::to_string(n) +
                                                   " values exceed the 32-bit index range (at most 4294967295)");
  if (values == nullptr && n > 0)
    return Status(ErrorCode::invalid_argument, std::string(who) + ": values is null for n = " + std::to_string(n));
  return Status::Ok();
}

}  // namespace

std::size_t select_above_scalar(const float* values, std::size_t n, float threshold, std::uint32_t* out_indices,
                                float* out_values, std::size_t capacity) noexcept {
  return select_above_range(values, 0, n, threshold, out_indices, out_values, capacity, 0);
}

SelectAboveFn select_above_kernel(block::SimdLevel level) noexcept {
  switch (level) {
#if defined(__x86_64__)
    case block::SimdLevel::avx512: return select_above_avx512;
    case block::SimdLevel::avx2: return select_above_avx2;
#endif
    default: return select_above_scalar;
  }
}

Status select_above(const float* values, std::size_t n, float threshold, std::uint32_t* out_indices, float* out_values,
                    std::size_t capacity, std::size_t* selected) {
  if (Status s = check("select_above", values, n, threshold); !s.ok()) return s;
  if (capacity > 0 && (out_indices == nullptr || out_values == nullptr))
    return Status(ErrorCode::invalid_argument,
                  "select_above: out_indices or out_values is null with capacity " + std::to_string(capacity));
  *selected = select_above_kernel(block::simd_level())(values, n, threshold, out_indices, out_values, capacity);
  return Status::Ok();
}

Status count_above(const float* values, std::size_t n, float threshold, std::size_t* selected) {
  if (Status s = check("count_above", values, n, threshold); !s.ok()) return s;
  *selected = select_above_kernel(block::simd_level())(values, n, threshold, nullptr, nullptr, 0);
  return Status::Ok();
}

}  // namespace sparcoll::algo::compress
