// Error-feedback residuals kept per tensor id.
#include "algo/compress/residual_store.hpp"

#include <algorithm>
#include <string>

namespace sparcoll::algo::compress {

Status ResidualStore::accumulate(std::uint64_t id, const float* grad, std::size_t n, float** accumulated) {
  if (accumulated == nullptr || (grad == nullptr && n > 0))
    return Status(ErrorCode::invalid_argument,
                  "residual store: accumulate for tensor id " + std::to_string(id) + " got a null pointer");
  auto [it, created] = residuals_.try_emplace(id);
  std::vector<float>& r = it->second;
  if (created) {
    r.assign(n, 0.0f);
  } else if (r.size() != n) {
    return Status(ErrorCode::invalid_argument, "residual store: tensor id " + std::to_string(id) + " has " +
                                                   std::to_string(r.size()) + " values, this step gives " +
                                                   std::to_string(n));
  }
  float* acc = r.data();
  for (std::size_t i = 0; i < n; ++i) acc[i] += grad[i];
  *accumulated = acc;
  return Status::Ok();
}

Status ResidualStore::keep_unsent(std::uint64_t id, const std::uint32_t* sent_indices, std::size_t nnz) {
  const auto it = residuals_.find(id);
  if (it == residuals_.end())
    return Status(ErrorCode::invalid_argument,
                  "residual store: keep_unsent for tensor id " + std::to_string(id) + " before any accumulate");
  if (sent_indices == nullptr && nnz > 0)
    return Status(ErrorCode::invalid_argument,
                  "residual store: keep_unsent for tensor id " + std::to_string(id) + " got null indices");
  std::vector<float>& r = it->second;
  const std::size_t n = r.size();
  // Check everything before changing anything, so a bad call leaves the residual intact.
  const std::uint32_t* bad = std::find_if(sent_indices, sent_indices + nnz, [n](std::uint32_t i) { return i >= n; });
  if (bad != sent_indices + nnz)
    return Status(ErrorCode::invalid_argument,
                  "residual store: tensor id " + std::to_string(id) + ": sent index " + std::to_string(*bad) +
                      " (position " + std::to_string(bad - sent_indices) + ") is out of range for " +
                      std::to_string(n) + " values");
  float* acc = r.data();
  for (std::size_t j = 0; j < nnz; ++j) acc[sent_indices[j]] = 0.0f;
  return Status::Ok();
}

const float* ResidualStore::residual(std::uint64_t id, std::size_t* n) const noexcept {
  const auto it = residuals_.find(id);
  if (n != nullptr) *n = it == residuals_.end() ? 0 : it->second.size();
  return it == residuals_.end() ? nullptr : it->second.data();
}

bool ResidualStore::clear(std::uint64_t id) noexcept {
  const auto it = residuals_.find(id);
  if (it == residuals_.end()) return false;
  std::fill(it->second.begin(), it->second.end(), 0.0f);
  return true;
}

bool ResidualStore::erase(std::uint64_t id) noexcept { return residuals_.erase(id) > 0; }

}  // namespace sparcoll::algo::compress
