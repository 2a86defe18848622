// Synthetic sparse tensors and their reference reduction, shared by sparcoll-perf and the tests.
//
// The generator follows OmniReduce's benchmark harness: each rank marks round(density x blocks)
// blocks non-zero, chosen at random with a seed derived from (seed, rank), and fills them with
// non-zero random values (a counter-based stream keyed by seed, rank and block, so the reference
// regenerates only the chosen blocks). Other patterns: every rank the same blocks ("overlap"), ranks on
// disjoint blocks ("disjoint"), rank 0 dense among sparse ranks ("one_dense"), and the first half of
// the tensor dense on every rank, the second half at the density ("dense_half": a gradient bucket
// of dense layers and a sparse embedding, whose stripes the hybrid allreduce splits).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sparcoll/types.hpp"

namespace sparcoll::perf {

enum class Pattern { random, overlap, disjoint, one_dense, dense_half };

bool parse_pattern(const std::string& name, Pattern* out);
const char* pattern_name(Pattern p);

struct WorkloadSpec {
  std::size_t count = 0;
  DataType dtype = DataType::f32;
  double density = 0.01;          // fraction of blocks that are non-zero on each rank
  std::uint32_t block_elems = 256;
  Pattern pattern = Pattern::random;
  std::uint64_t seed = 1;
  int world_size = 1;
};

// SplitMix64's finalizer over (seed, salt): the suite's seeded draws (blocks, values, the order
// of call-by-call turns), the same on every rank for the same arguments.
std::uint64_t mix(std::uint64_t seed, std::uint64_t salt);

// Fills `out` (count elements of spec.dtype, as bytes) with rank `rank`'s tensor.
void generate(const WorkloadSpec& spec, int rank, std::vector<std::byte>* out);

// The exact result every rank must receive: rank-order reduction with an fp32 (or int32)
// accumulator, narrowed once, written independently of the library's kernels.
void reference(const WorkloadSpec& spec, ReduceOp op, std::vector<std::byte>* out);

// Number of non-zero blocks of rank `rank`'s tensor.
std::size_t nonzero_blocks(const WorkloadSpec& spec, int rank);

// Number of elements of `got` that differ from `want` (NaN equals NaN, -0 equals +0);
// the first mismatch is described in *first when non-null.
std::size_t count_wrong(const std::vector<std::byte>& got, const std::vector<std::byte>& want, DataType dtype,
                        std::string* first);

}  // namespace sparcoll::perf
