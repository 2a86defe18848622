// Exact top-k: nth_element on the magnitudes' bit patterns, then a pass that keeps what is above
// the k-th magnitude plus the lowest-index ties.
#include "algo/compress/topk.hpp"

#include <algorithm>
#include <bit>
#include <functional>
#include <limits>
#include <string>

namespace sparcoll::algo::compress {
namespace {

constexpr std::uint32_t kAbsMask = 0x7fffffffu;
constexpr std::uint32_t kInfBits = 0x7f800000u;

// Non-negative floats order like their bit patterns as unsigned integers (Inf included; NaN
// patterns sort above Inf, which is why NaN is rejected): integer comparisons from here on.
inline std::uint32_t magnitude_bits(float v) noexcept { return std::bit_cast<std::uint32_t>(v) & kAbsMask; }

Status check_common(const char* who, const float* values, std::size_t n) {
  if (n > std::numeric_limits<std::uint32_t>::max())
    return Status(ErrorCode::invalid_argument, std::string(who) + ": " + std::to_string(n) +
                                                   " values exceed the 32-bit index range (at most 4294967295)");
  if (values == nullptr && n > 0)
    return Status(ErrorCode::invalid_argument, std::string(who) + ": values is null for n = " + std::to_string(n));
  return Status::Ok();
}

// Fills scratch with the magnitude bits of values[0, n) and finds the first NaN, if any, in the
// same pass (the OR-reduction keeps the loop branch-free and vectorizable; the index is looked
// up only on failure).
Status load_magnitudes(const char* who, const float* values, std::size_t n, TopkScratch& scratch) {
  scratch.magnitudes.resize(n);  // capacity kept between calls: no allocation after warm-up
  std::uint32_t* m = scratch.magnitudes.data();
  std::uint32_t any_nan = 0;
  for (std::size_t i = 0; i < n; ++i) {
    m[i] = magnitude_bits(values[i]);
    any_nan |= static_cast<std::uint32_t>(m[i] > kInfBits);
  }
  if (any_nan) {
    const std::size_t at = static_cast<std::size_t>(
        std::find_if(m, m + n, [](std::uint32_t x) { return x > kInfBits; }) - m);
    return Status(ErrorCode::invalid_argument,
                  std::string(who) + ": value at index " + std::to_string(at) + " is nan (it has no magnitude order)");
  }
  return Status::Ok();
}

// The k-th largest (1 <= k <= n) of scratch's magnitudes; reorders the scratch.
std::uint32_t kth_largest(TopkScratch& scratch, std::size_t k) noexcept {
  auto& m = scratch.magnitudes;
  const auto nth = m.begin() + static_cast<std::ptrdiff_t>(k - 1);
  std::nth_element(m.begin(), nth, m.end(), std::greater<std::uint32_t>());
  return *nth;
}

}  // namespace

Status topk_threshold(const float* values, std::size_t n, std::size_t k, float* threshold, TopkScratch& scratch) {
  if (Status s = check_common("topk_threshold", values, n); !s.ok()) return s;
  if (k == 0 || k > n)
    return Status(ErrorCode::invalid_argument,
                  "topk_threshold: k = " + std::to_string(k) + " is outside [1, n = " + std::to_string(n) + "]");
  if (Status s = load_magnitudes("topk_threshold", values, n, scratch); !s.ok()) return s;
  *threshold = std::bit_cast<float>(kth_largest(scratch, k));
  return Status::Ok();
}

Status exact_topk(const float* values, std::size_t n, std::size_t k, std::uint32_t* out_indices, float* out_values,
                  TopkScratch& scratch) {
  if (Status s = check_common("exact_topk", values, n); !s.ok()) return s;
  if (k > n)
    return Status(ErrorCode::invalid_argument,
                  "exact_topk: k = " + std::to_string(k) + " is larger than n = " + std::to_string(n));
  if (k > 0 && (out_indices == nullptr || out_values == nullptr))
    return Status(ErrorCode::invalid_argument,
                  "exact_topk: out_indices or out_values is null for k = " + std::to_string(k));
  if (Status s = load_magnitudes("exact_topk", values, n, scratch); !s.ok()) return s;
  if (k == 0) return Status::Ok();
  const std::uint32_t t = kth_largest(scratch, k);
  // How many of the k slots the entries equal to t get: k minus those strictly above, which
  // nth_element left in front of position k-1 (possibly with some equal to t among them).
  const auto& m = scratch.magnitudes;
  std::size_t above = 0;
  for (std::size_t i = 0; i + 1 < k; ++i) above += m[i] > t;
  std::size_t ties_left = k - above;
  std::size_t count = 0;
  for (std::size_t i = 0; i < n && count < k; ++i) {
    const std::uint32_t mi = magnitude_bits(values[i]);
    if (mi < t) continue;
    if (mi == t) {
      if (ties_left == 0) continue;
      --ties_left;
    }
    out_indices[count] = static_cast<std::uint32_t>(i);
    out_values[count] = values[i];
    ++count;
  }
  return Status::Ok();
}

}  // namespace sparcoll::algo::compress
