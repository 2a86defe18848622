// The soak's sequence of collectives: drawn from a seeded generator, so every rank draws the same
// calls in the same order (collectives must match across ranks) and a run can be replayed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "sparcoll/types.hpp"
#include "workload.hpp"

namespace sparcoll::soak {

// Tensors of the calls that run several at once stay small: eight 16 MiB tensors in flight would
// measure the machine's memory, not the library's.
constexpr std::size_t kBatchMaxBytes = std::size_t{1} << 20;
// SparCML converts a dense 100% tensor to (index, value) pairs: 4 MiB is already 2M entries.
constexpr std::size_t kSparseMaxBytes = std::size_t{4} << 20;

enum class Kind : std::uint8_t {
  allreduce,
  broadcast,
  allgather,
  reduce_scatter,
  barrier,
  sparse,
  compressed,
  rejected,
  reduce,
  gather,
  scatter,
  all_to_all,
  p2p,        // send and recv around the ring (2+ ranks)
  coalesced,  // allreduce_coalesced of a tensor cut into four buffers
};

const char* kind_name(Kind k);
bool reduces(Kind k);  // takes a reduction op
bool rooted(Kind k);   // takes a root
// What a call's count is divided by to stay within a byte limit: the ranks, for the kinds whose
// count is per rank and whose buffers hold every rank's piece.
std::size_t per_rank_divisor(Kind k, int world);
bool parse_kind(std::string_view name, Kind* out);
std::vector<Kind> all_kinds();

// One collective call: everything the ranks must agree on. The data itself is generated from
// `seed` and the rank (perf/lib/workload.hpp), so every rank can rebuild every other rank's input.
struct Call {
  Kind kind = Kind::barrier;
  Algorithm algo = Algorithm::from_options;  // allreduce, sparse
  DataType dtype = DataType::f32;
  ReduceOp op = ReduceOp::sum;
  // allreduce, broadcast, reduce, p2p, coalesced: elements; allgather, reduce_scatter, gather,
  // scatter, all_to_all: elements per rank; sparse: dim.
  std::size_t count = 0;
  double density = 0;  // fraction of non-zero blocks on each rank
  perf::Pattern pattern = perf::Pattern::random;
  bool in_place = false;
  bool nonblocking = false;
  bool register_send = false;  // allreduce: register_buffer the send buffer around the call
  int root = 0;                // broadcast, reduce, gather, scatter
  int tensor = 0;              // compressed: index into compressed_tensors()
  int fault = 0;               // rejected: which bad call (rejected.hpp)
  std::uint64_t seed = 0;
  std::string describe() const;
};

// Calls issued together (the non-blocking ones all in flight), then completed in order.
struct Step {
  std::vector<Call> calls;
};

struct MixOptions {
  int world = 1;
  std::size_t max_bytes = std::size_t{16} << 20;  // largest tensor of any call
  std::vector<Kind> kinds;                        // the kinds drawn (all_kinds() by default)
  int max_batch = 8;                              // most non-blocking calls in flight in one step
  std::uint64_t seed = 1;
  std::size_t tensors = 0;                        // entries of the compressed-tensor table
  int faults = 0;                                 // bad-call variants available (rejected.hpp)
};

class Mix {
 public:
  explicit Mix(MixOptions options);
  // The primer first (every kind at its largest size, so the memory high-water marks are reached
  // during warm-up, not later by chance), then random steps.
  Step next();

 private:
  Step draw();
  Call draw_call(Kind kind, bool nonblocking, std::size_t max_bytes);
  std::size_t draw_count(DataType dtype, std::size_t max_bytes);
  std::size_t kind_max_bytes(Kind kind) const;
  bool enabled(Kind kind) const;

  MixOptions options_;
  std::mt19937_64 rng_;
  std::vector<Step> primer_;
  std::size_t primed_ = 0;
  std::uint64_t calls_ = 0;
};

}  // namespace sparcoll::soak
