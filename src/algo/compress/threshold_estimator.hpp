// The Ok-Topk threshold estimator (Li & Hoefler, PPoPP'22): select "about k" entries of a
// gradient by a threshold instead of an exact top-k on most steps, relying on gradients changing
// slowly between steps (the research notes, §3.2 steps 1, 4 and 8).
//
// Contract, per call of select() (or next_threshold() + observe() when the caller selects
// itself, e.g. Ok-Topk's global threshold whose exact value comes from gathered values):
//  * exact steps: the first call, every `recompute_every`-th call after the last exact step,
//    and any call whose n differs from the previous one. The threshold is the exact k-th largest
//    magnitude (topk_threshold), so at least k entries qualify (more only on ties).
//  * other steps reuse the threshold as adapted after the previous step: if that step selected
//    fewer than k * band_low entries, it was divided by `lower_factor`; more than
//    k * band_high, multiplied by `raise_factor`; inside the band, left as is.
//  * the threshold is never below the smallest positive float, so exact zeros are never
//    selected (a vector with fewer than k non-zeros selects just its non-zeros).
//  * select() never writes more than `capacity` (>= k) entries: when more qualify it multiplies
//    the threshold by raise_factor and selects again, up to `overflow_retries` times, then falls
//    back to exact_topk (exactly k entries, ties to the lowest indices) and counts that step as
//    exact. The result is in increasing index order either way.
// Not thread-safe: one estimator per tensor (and per thread using it).
#pragma once

#include <cstddef>
#include <cstdint>

#include "algo/compress/topk.hpp"
#include "sparcoll/status.hpp"

namespace sparcoll::algo::compress {

struct ThresholdEstimatorConfig {
  std::size_t k = 0;                    // target count, >= 1
  std::uint32_t recompute_every = 32;   // τ: exact threshold every τ calls (Ok-Topk: 32 VGG/LSTM, 128 BERT); >= 1
  double band_low = 0.75;               // keep the count in [k * band_low, k * band_high] (Ok-Topk LSTM: 3/4, 5/4)
  double band_high = 1.25;
  double lower_factor = 1.012;          // > 1; the adaptation steps of Ok-Topk's LSTM setting
  double raise_factor = 1.012;          // > 1
  std::uint32_t overflow_retries = 5;   // raises within one select() before the exact fallback
};

class ThresholdEstimator {
 public:
  // Errors (invalid_argument): k == 0, recompute_every == 0, band_low > 1, band_high < 1,
  // band_low < 0, a factor not finite or <= 1; the message names the field and its value.
  static Status create(const ThresholdEstimatorConfig& config, ThresholdEstimator* out);

  // Selects about k entries of values[0, n) as described above into out_indices / out_values
  // (room for `capacity` >= k entries) and sets *selected. Errors: those of topk_threshold and
  // select_above, and capacity < k (invalid_argument).
  Status select(const float* values, std::size_t n, std::uint32_t* out_indices, float* out_values,
                std::size_t capacity, std::size_t* selected, TopkScratch& scratch);

  // The two halves of select(), for callers that select themselves. next_threshold() gives the
  // threshold for this step (computing it exactly on exact steps); observe() takes the count
  // that was selected with it and adapts the threshold for the next step. Every step must call
  // both, in that order.
  Status next_threshold(const float* values, std::size_t n, float* threshold, TopkScratch& scratch);
  void observe(std::size_t selected) noexcept;

  // Whether the next call is an exact step for a vector of n values.
  bool exact_due(std::size_t n) const noexcept;
  // Replaces the next step's threshold with an exact one computed elsewhere (Ok-Topk's global
  // threshold from the gathered values) and restarts the recompute period from it.
  void set_exact(float threshold, std::size_t n) noexcept;

  float threshold() const noexcept { return threshold_; }
  bool last_was_exact() const noexcept { return last_exact_; }
  const ThresholdEstimatorConfig& config() const noexcept { return config_; }

 private:
  ThresholdEstimatorConfig config_;
  float threshold_ = 0.0f;
  std::size_t n_ = 0;                  // n of the last step
  std::uint64_t since_exact_ = 0;      // steps since the last exact one
  bool have_threshold_ = false;
  bool pending_exact_ = false;         // set_exact() gave the next step's threshold
  bool last_exact_ = false;
};

}  // namespace sparcoll::algo::compress
