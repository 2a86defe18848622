// The phases that ssar_split_allgather and dsar_split_allgather share (SparCML): the index space
// [0, dim) is cut into one range per rank (chunk_begin); every rank sends each rank its entries
// of that rank's range (a direct all-to-all of sparse pieces); the owner reduces its range (the
// one step in which the two algorithms differ: ssar.cpp, dsar.cpp); then every rank sends its
// finished range to every other (a direct allgather), and each writes the ranges in order.
// Also the output of the SparCML algorithms (a dense tensor or a SparseResult).
#pragma once

#include "algo/p2p_algorithms.hpp"
#include "common/task.hpp"

namespace sparcoll::algo::split {

// Fills s.pieces[k] with rank k's entries of this rank's range, k in rank order (this rank's
// own is a slice of `local`, the others views into s.in). Accumulator values.
Task exchange(p2p::Peers& peers, const SparseVector& local, std::size_t dim, DataType acc_type, SparseScratch& s);

// Sends s.mine (this rank's finished range, final dtype values, sparse or dense) to every rank,
// receives theirs and writes all ranges, in order, to `out`.
Task gather(p2p::Peers& peers, std::size_t dim, DataType dtype, const SparseOutput& out, SparseScratch& s);

}  // namespace sparcoll::algo::split

namespace sparcoll::algo {

// Writes a finished sparse result held as accumulators (recursive doubling) to `out`: narrowed
// once (avg: divided by nranks).
void store_sparse_result(SparseSpan acc, std::size_t dim, DataType dtype, ReduceOp op, std::uint32_t nranks,
                         const SparseOutput& out, Scratch& scratch);

}  // namespace sparcoll::algo
