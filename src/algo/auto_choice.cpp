#include "algo/auto_choice.hpp"

#include <algorithm>
#include <bit>

#include "algo/hybrid_plan.hpp"

namespace sparcoll::algo {

std::size_t small_tensor_limit(std::uint32_t ranks, bool over_shm, std::uint32_t small_tensor_bytes) {
  const int doublings_above_two = ranks > 2 ? static_cast<int>(std::bit_width(ranks - 1u)) - 1 : 0;
  const int halvings = std::max(1, doublings_above_two + (over_shm ? 1 : 0));
  return std::size_t{small_tensor_bytes} >> halvings;
}

Algorithm auto_algorithm(std::uint32_t ranks, bool over_shm, std::size_t bytes, std::uint32_t small_tensor_bytes) {
  if (ranks <= 1) return Algorithm::block_sparse;
  if (bytes > small_tensor_bytes) return Algorithm::hybrid;
  if (bytes <= small_tensor_limit(ranks, over_shm, small_tensor_bytes)) return Algorithm::block_recursive_doubling;
  return over_shm ? dense_algorithm_below_stripes(ranks) : Algorithm::hybrid;
}

}  // namespace sparcoll::algo
