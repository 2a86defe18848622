// What `auto` runs for a 32-bit dtype: by ranks, transport and size, the same on every rank.
#include "algo/auto_choice.hpp"

#include <gtest/gtest.h>

namespace sparcoll::algo {
namespace {

constexpr std::uint32_t kSmall = 64 * 1024;  // SPARCOLL_SMALL_TENSOR_BYTES' default

TEST(AutoChoice, OneRankCopiesByBlockSparse) {
  EXPECT_EQ(auto_algorithm(1, true, 4096, kSmall), Algorithm::block_sparse);
  EXPECT_EQ(auto_algorithm(1, false, std::size_t{1} << 30, kSmall), Algorithm::block_sparse);
}

TEST(AutoChoice, BlockRecursiveDoublingsLimitHalvesPerDoublingAboveTwoRanksOnceMoreOverShmAndAtLeastOnce) {
  EXPECT_EQ(small_tensor_limit(2, false, kSmall), 32u * 1024);  // at least once: loopback's 64 KiB segments
  EXPECT_EQ(small_tensor_limit(2, true, kSmall), 32u * 1024);
  EXPECT_EQ(small_tensor_limit(3, false, kSmall), 32u * 1024);
  EXPECT_EQ(small_tensor_limit(4, false, kSmall), 32u * 1024);
  EXPECT_EQ(small_tensor_limit(4, true, kSmall), 16u * 1024);
  EXPECT_EQ(small_tensor_limit(5, false, kSmall), 16u * 1024);
  EXPECT_EQ(small_tensor_limit(8, false, kSmall), 16u * 1024);
  EXPECT_EQ(small_tensor_limit(8, true, kSmall), 8u * 1024);
  EXPECT_EQ(small_tensor_limit(2, false, 0), 0u);
}

TEST(AutoChoice, SmallTensorsByBlockRecursiveDoublingThenTheDenseAlgorithmOrTheHybridThenTheHybrid) {
  EXPECT_EQ(auto_algorithm(2, false, 0, kSmall), Algorithm::block_recursive_doubling);
  EXPECT_EQ(auto_algorithm(2, false, 32 * 1024, kSmall), Algorithm::block_recursive_doubling);
  // The rest of the small range: over a wire the hybrid, over shm the dense algorithm.
  EXPECT_EQ(auto_algorithm(2, false, 32 * 1024 + 4, kSmall), Algorithm::hybrid);
  EXPECT_EQ(auto_algorithm(2, false, 64 * 1024, kSmall), Algorithm::hybrid);
  EXPECT_EQ(auto_algorithm(2, true, 32 * 1024 + 4, kSmall), Algorithm::ring);
  EXPECT_EQ(auto_algorithm(2, true, 16 * 1024, kSmall), Algorithm::block_recursive_doubling);
  EXPECT_EQ(auto_algorithm(2, false, 64 * 1024 + 4, kSmall), Algorithm::hybrid);
  EXPECT_EQ(auto_algorithm(4, true, 16 * 1024, kSmall), Algorithm::block_recursive_doubling);
  EXPECT_EQ(auto_algorithm(4, true, 32 * 1024, kSmall), Algorithm::butterfly);  // a power of two above 2
  EXPECT_EQ(auto_algorithm(4, false, 48 * 1024, kSmall), Algorithm::hybrid);
  EXPECT_EQ(auto_algorithm(3, true, 48 * 1024, kSmall), Algorithm::ring);
  EXPECT_EQ(auto_algorithm(3, false, 48 * 1024, kSmall), Algorithm::hybrid);
  EXPECT_EQ(auto_algorithm(8, false, 1 << 20, kSmall), Algorithm::hybrid);
  EXPECT_EQ(auto_algorithm(2, true, 1, 0), Algorithm::hybrid);  // 0: no small range
  EXPECT_EQ(auto_algorithm(2, true, 0, 0), Algorithm::block_recursive_doubling);
}

}  // namespace
}  // namespace sparcoll::algo
