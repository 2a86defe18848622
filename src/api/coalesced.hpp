// allreduce_coalesced and allgather_coalesced: several buffers packed into one collective, and
// what their Request keeps until the results are copied out (communicator_coalesced.cpp).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sparcoll/communicator.hpp"

namespace sparcoll::detail {

struct Coalesced {
  const char* call = "allreduce_coalesced";
  bool gathers = false;  // allgather_coalesced: the packed buffer holds every rank's pieces
  int rank = 0;
  int ranks = 1;
  // The caller's send buffers back to back; allgather: every rank's, in rank order.
  std::vector<std::byte> packed;
  std::size_t rank_bytes = 0;  // one rank's pieces in `packed`
  struct Piece {
    std::byte* recv = nullptr;
    std::size_t bytes = 0;
  };
  std::vector<Piece> pieces;
  std::string layout;  // this rank's counts, for the error when they differ across ranks
  // The agreement, max-reduced over ranks alongside the collective: [layout hash, -hash, the
  // highest rank with a bad argument + 1]. Every rank named the same counts iff both hash words
  // come back unchanged (max(h) == h and max(-h) == -h means min(h) == max(h)).
  std::array<std::int32_t, 3> agreement{};
  std::int32_t layout_hash = 0;  // this rank's
  Request agreement_request;
  std::string problem;  // this rank's bad argument; empty when there is none
};

}  // namespace sparcoll::detail
