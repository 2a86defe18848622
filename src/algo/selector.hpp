// The "auto" algorithm: an α-β cost model of every exact allreduce algorithm (docs/algorithms.md)
// evaluated on the call's size and on densities every rank agrees on, so every rank picks the
// same algorithm. α (per message) and β (per byte) are the link's, measured once per
// communicator (or given by SPARCOLL_LINK_LATENCY_NS / SPARCOLL_LINK_MBPS).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "sparcoll/types.hpp"

namespace sparcoll::algo {

struct LinkModel {
  double alpha_us = 10.0;         // one message's latency
  double beta_us_per_byte = 1e-3; // inverse bandwidth of one rank's link
};

struct SelectionInput {
  std::uint32_t ranks = 1;
  std::size_t count = 0;
  DataType dtype = DataType::f32;
  ReduceOp op = ReduceOp::sum;
  std::uint32_t block_elems = 256;
  std::uint32_t lanes = 64;
  std::uint32_t fusion = 8;
  bool dedicated_aggregators = false;
  double block_density = 1.0;  // mean over ranks: non-zero blocks / blocks
  double elem_density = 1.0;   // mean over ranks: non-zero elements / elements
  bool sparse_algorithms = true;  // SSAR/DSAR built in and applicable (sum/avg)
};

// The candidates, in the order predictions are reported.
inline constexpr std::array<Algorithm, 6> kCandidates = {
    Algorithm::block_sparse,         Algorithm::ring,
    Algorithm::butterfly,            Algorithm::ssar_recursive_doubling,
    Algorithm::ssar_split_allgather, Algorithm::dsar_split_allgather};

// Predicted microseconds of `algo` on `in` (infinity when it does not apply).
double predict_us(Algorithm algo, const SelectionInput& in, const LinkModel& link);

// The candidate with the smallest prediction (ties: the earlier candidate); predictions in the
// order of kCandidates when `predicted` is non-null.
Algorithm select_allreduce(const SelectionInput& in, const LinkModel& link, std::array<double, 6>* predicted);

}  // namespace sparcoll::algo
