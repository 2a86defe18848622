// The Ok-Topk threshold estimator: exact every τ steps, multiplicative adaptation in between.
#include "algo/compress/threshold_estimator.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "algo/compress/select_above.hpp"

namespace sparcoll::algo::compress {
namespace {

// The floor of every threshold: with |v| >= this, an exact zero is never selected, and
// multiplying it by a factor > 1 moves it (0 would stay stuck at 0).
constexpr float kMinThreshold = std::numeric_limits<float>::denorm_min();

Status bad(const char* field, double value, const char* rule) {
  return Status(ErrorCode::invalid_argument,
                std::string("threshold estimator: ") + field + " = " + std::to_string(value) + " " + rule);
}

float clamp_threshold(double t) noexcept {
  if (!(t >= kMinThreshold)) return kMinThreshold;
  if (t > std::numeric_limits<float>::max()) return std::numeric_limits<float>::infinity();
  return static_cast<float>(t);
}

}  // namespace

Status ThresholdEstimator::create(const ThresholdEstimatorConfig& c, ThresholdEstimator* out) {
  if (c.k == 0) return bad("k", 0, "must be at least 1");
  if (c.recompute_every == 0) return bad("recompute_every", 0, "must be at least 1");
  if (!(c.band_low >= 0.0 && c.band_low <= 1.0)) return bad("band_low", c.band_low, "must be in [0, 1]");
  if (!(c.band_high >= 1.0 && std::isfinite(c.band_high))) return bad("band_high", c.band_high, "must be finite and >= 1");
  if (!(c.lower_factor > 1.0 && std::isfinite(c.lower_factor)))
    return bad("lower_factor", c.lower_factor, "must be finite and > 1");
  if (!(c.raise_factor > 1.0 && std::isfinite(c.raise_factor)))
    return bad("raise_factor", c.raise_factor, "must be finite and > 1");
  *out = ThresholdEstimator();
  out->config_ = c;
  return Status::Ok();
}

bool ThresholdEstimator::exact_due(std::size_t n) const noexcept {
  return !pending_exact_ && (!have_threshold_ || n != n_ || since_exact_ >= config_.recompute_every);
}

void ThresholdEstimator::set_exact(float threshold, std::size_t n) noexcept {
  threshold_ = clamp_threshold(threshold);
  n_ = n;
  have_threshold_ = true;
  pending_exact_ = true;
}

Status ThresholdEstimator::next_threshold(const float* values, std::size_t n, float* threshold, TopkScratch& scratch) {
  if (exact_due(n)) {
    if (config_.k > n)
      return Status(ErrorCode::invalid_argument, "threshold estimator: k = " + std::to_string(config_.k) +
                                                     " is larger than n = " + std::to_string(n));
    float t = 0.0f;
    if (Status s = topk_threshold(values, n, config_.k, &t, scratch); !s.ok()) return s;
    threshold_ = clamp_threshold(t);
    n_ = n;
    have_threshold_ = true;
    last_exact_ = true;
  } else {
    last_exact_ = pending_exact_;
  }
  pending_exact_ = false;
  *threshold = threshold_;
  return Status::Ok();
}

void ThresholdEstimator::observe(std::size_t selected) noexcept {
  since_exact_ = last_exact_ ? 1 : since_exact_ + 1;
  const double k = static_cast<double>(config_.k), count = static_cast<double>(selected);
  if (count < k * config_.band_low)
    threshold_ = clamp_threshold(threshold_ / config_.lower_factor);
  else if (count > k * config_.band_high)
    threshold_ = clamp_threshold(threshold_ * config_.raise_factor);
}

Status ThresholdEstimator::select(const float* values, std::size_t n, std::uint32_t* out_indices, float* out_values,
                                  std::size_t capacity, std::size_t* selected, TopkScratch& scratch) {
  if (capacity < config_.k)
    return Status(ErrorCode::invalid_argument, "threshold estimator: capacity " + std::to_string(capacity) +
                                                   " is below k = " + std::to_string(config_.k));
  float t = 0.0f;
  if (Status s = next_threshold(values, n, &t, scratch); !s.ok()) return s;
  std::size_t count = 0;
  if (Status s = select_above(values, n, t, out_indices, out_values, capacity, &count); !s.ok()) return s;
  // Too many qualify to fit: raise within this step (the data moved faster than the
  // adaptation), and as a last resort take the exact top-k, which always fits.
  for (std::uint32_t retry = 0; count > capacity && retry < config_.overflow_retries; ++retry) {
    t = clamp_threshold(static_cast<double>(t) * config_.raise_factor);
    if (Status s = select_above(values, n, t, out_indices, out_values, capacity, &count); !s.ok()) return s;
  }
  if (count > capacity) {
    if (Status s = exact_topk(values, n, config_.k, out_indices, out_values, scratch); !s.ok()) return s;
    count = config_.k;
    // The k-th magnitude among the k just selected is the exact threshold for what follows.
    float kth = std::numeric_limits<float>::infinity();
    for (std::size_t i = 0; i < count; ++i) kth = std::min(kth, std::fabs(out_values[i]));
    threshold_ = clamp_threshold(kth);
    last_exact_ = true;
  } else {
    threshold_ = t;
  }
  observe(count);
  *selected = count;
  return Status::Ok();
}

}  // namespace sparcoll::algo::compress
