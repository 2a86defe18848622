// parallel_ranges (src/block/parallel_ranges.hpp): every index covered once, in at most as many
// ranges as the threads it is given (no more ranges than can run at once: the bound a process
// sharing its host keeps to), and no more than n / grain rounded up.
#include "block/parallel_ranges.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <mutex>
#include <utility>
#include <vector>

namespace sparcoll::block {
namespace {

struct Calls {
  std::mutex mutex;
  std::vector<std::pair<std::size_t, std::size_t>> ranges;
};

void record(void* context, std::size_t begin, std::size_t end) {
  auto& calls = *static_cast<Calls*>(context);
  std::lock_guard<std::mutex> lock(calls.mutex);
  calls.ranges.emplace_back(begin, end);
}

TEST(ParallelRanges, CoverEveryIndexOnceInAtMostOneRangePerThread) {
  for (const std::size_t n : {1u, 2u, 7u, 64u, 1000u, 100003u}) {
    for (const std::size_t grain : {1u, 16u, 5000u}) {
      for (const unsigned threads : {1u, 2u, 3u, 8u}) {
        Calls calls;
        parallel_ranges(n, grain, threads, &record, &calls);
        SCOPED_TRACE(testing::Message() << "n " << n << " grain " << grain << " threads " << threads);
        std::sort(calls.ranges.begin(), calls.ranges.end());
        EXPECT_LE(calls.ranges.size(), threads);
        EXPECT_LE(calls.ranges.size(), (n + grain - 1) / grain);
        std::size_t next = 0;
        for (const auto& [begin, end] : calls.ranges) {
          EXPECT_EQ(begin, next);
          EXPECT_GT(end, begin);
          next = end;
        }
        EXPECT_EQ(next, n);
      }
    }
  }
}

}  // namespace
}  // namespace sparcoll::block
