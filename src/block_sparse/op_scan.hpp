// The scan that finds an op's non-zero blocks: the bitmap block-sparse aggregation sends by.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "block_sparse/op_state.hpp"

namespace sparcoll::block_sparse {

// Sets op.bitmap's bits for blocks [first_block, end_block) of op.send (count elements of
// op.geometry.dtype) from one read of them; first_block is a multiple of 64 (whole bitmap words),
// and the words are written whole. In place, blocks that no rank sends keep their bytes, so a
// local block of -0.0 (zero, not sent) is turned into +0 in recv, and every rank ends with the
// same bytes there. `signed_zero` is scratch for that (kept by the caller to reuse its capacity).
void scan_op_blocks(OpState& op, std::size_t count, std::size_t first_block, std::size_t end_block,
                    std::vector<std::uint64_t>* signed_zero);

}  // namespace sparcoll::block_sparse
