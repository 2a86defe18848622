// sparcoll-int-avg-check: under sparcoll-run, i32 allreduces whose sums leave the int32 range,
// with every algorithm: avg is exact (avg of INT32_MAX on every rank is INT32_MAX; it was -1),
// sum wraps modulo 2^32 as documented (docs/algorithms.md). Prints "int-avg-check: ok".
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <vector>

#include "sparcoll/sparcoll.hpp"

namespace {

// What rank r contributes at element i: extremes, their neighbours, signs and zeros.
std::int32_t value(int r, std::size_t i) {
  constexpr std::int32_t kMax = std::numeric_limits<std::int32_t>::max();
  constexpr std::int32_t kMin = std::numeric_limits<std::int32_t>::min();
  switch (i % 8) {
    case 0: return kMax;
    case 1: return kMin;
    case 2: return r % 2 ? kMax : kMin;
    case 3: return kMax - r;
    case 4: return -1 - r;
    case 5: return 0;
    case 6: return static_cast<std::int32_t>(1000003 * (r + 1) * static_cast<std::int64_t>(i % 1000));
    default: return r == 0 ? kMin : 7;
  }
}

}  // namespace

int main() {
  auto comm = sparcoll::Communicator::from_env();
  const int n = comm.size();
  constexpr std::size_t kCount = 5003;  // odd tail, several blocks
  int failures = 0;
  for (sparcoll::Algorithm algo : {sparcoll::Algorithm::block_sparse, sparcoll::Algorithm::ring,
                                   sparcoll::Algorithm::butterfly, sparcoll::Algorithm::ssar_recursive_doubling,
                                   sparcoll::Algorithm::dsar_split_allgather}) {
    for (sparcoll::ReduceOp op : {sparcoll::ReduceOp::avg, sparcoll::ReduceOp::sum}) {
      std::vector<std::int32_t> v(kCount);
      for (std::size_t i = 0; i < kCount; ++i) v[i] = value(comm.rank(), i);
      comm.allreduce(v.data(), v.data(), kCount, sparcoll::DataType::i32, op, algo);
      for (std::size_t i = 0; i < kCount; ++i) {
        std::int64_t total = 0;
        for (int r = 0; r < n; ++r) total += value(r, i);
        const auto want = op == sparcoll::ReduceOp::avg
                              ? static_cast<std::int32_t>(total / n)
                              : static_cast<std::int32_t>(static_cast<std::uint32_t>(static_cast<std::uint64_t>(total)));
        if (v[i] != want && failures++ < 5)
          std::printf("int-avg-check: rank %d: %.*s %s element %zu: %" PRId32 ", expected %" PRId32 "\n", comm.rank(),
                      static_cast<int>(sparcoll::algorithm_name(algo).size()), sparcoll::algorithm_name(algo).data(),
                      op == sparcoll::ReduceOp::avg ? "avg" : "sum", i, v[i], want);
      }
    }
  }
  if (failures == 0) std::printf("int-avg-check: ok\n");
  return failures == 0 ? 0 : 1;
}
