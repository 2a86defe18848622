// A block set: the non-zero blocks of a tensor as one message, a bitmap of which blocks are
// present followed by their accumulators (fp32 for f32/f16/bf16, i32 for i32; block/reduce.hpp)
// packed in block order. Block recursive doubling (block_recursive_doubling.cpp) exchanges and
// merges them; a block absent from a set is zero on every rank that contributed to it.
//
// Layout (little-endian, like every sparcoll wire format):
//   BlockSetHeader (24 bytes) | bitmap: words(count) u64 | accumulators of the present blocks
// where block b holds min(block_elems, count - b * block_elems) elements. parse_block_set is
// the only reader of these bytes from a peer and checks every field against what this rank
// expects before anything is read through them (tests/fuzz/fuzz_block_set.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sparcoll/types.hpp"

namespace sparcoll::algo {

inline constexpr std::uint32_t kBlockSetMagic = 0x53424353;  // "SCBS"
inline constexpr std::uint16_t kBlockSetVersion = 1;

struct BlockSetHeader {
  std::uint32_t magic;
  std::uint16_t version;
  std::uint8_t acc_type;     // DataType of the accumulators: f32 or i32
  std::uint8_t reserved;     // 0
  std::uint32_t block_elems;
  std::uint32_t present;     // blocks in the set (set bits of the bitmap)
  std::uint64_t count;       // elements of the tensor
};
static_assert(sizeof(BlockSetHeader) == 24, "block set header is part of the wire format");

// The tensor a block set describes; every rank of a collective must have the same.
struct BlockGeometry {
  std::size_t count = 0;
  std::uint32_t block_elems = 0;
  DataType acc_type = DataType::f32;

  std::size_t blocks() const noexcept { return (count + block_elems - 1) / block_elems; }
  std::size_t words() const noexcept { return (blocks() + 63) / 64; }
  std::size_t elems_of(std::size_t block) const noexcept {
    const std::size_t begin = block * block_elems;
    return count - begin < block_elems ? count - begin : block_elems;
  }
  // The largest block set of this tensor: every block present.
  std::size_t max_bytes() const noexcept { return sizeof(BlockSetHeader) + words() * 8 + count * 4; }
};

// Accumulator bytes of `present` blocks, the tensor's last (short) block among them or not.
std::size_t block_set_value_bytes(const BlockGeometry& g, std::size_t present, bool last_present) noexcept;

// A parsed block set; points into the message it was parsed from.
struct BlockSetView {
  const std::uint64_t* bits = nullptr;
  const std::byte* values = nullptr;  // the present blocks' accumulators, packed
  std::size_t present = 0;
};

// *out = the block set of `data` (g.count elements of dtype): the blocks set in `bits` (from
// block::scan_nonzero_blocks), widened into accumulators.
void pack_block_set(const void* data, DataType dtype, const std::uint64_t* bits, const BlockGeometry& g,
                    std::vector<std::byte>* out);

// The set of `data` without its copy, where it is the tensor's own bytes: when every block is
// set in `bits` and the accumulators are dtype's bytes (f32, i32), writes only the set's header
// and bitmap into *head and returns true; the set is then *head followed by `data` unchanged
// (Peers' two-part send sends it so, one copy of the tensor fewer). Otherwise writes nothing
// and returns false: pack_block_set it.
bool block_set_head_of_whole(DataType dtype, const std::uint64_t* bits, const BlockGeometry& g,
                             std::vector<std::byte>* head);

// Checks `bytes` as a block set of tensor g. Returns "" and fills *view, or says what is wrong;
// *mismatch is set when the set is well formed but describes another tensor (another count, block
// size or accumulator type: the ranks' arguments differ), not a corrupt message.
std::string parse_block_set(const std::byte* bytes, std::size_t size, const BlockGeometry& g, BlockSetView* view,
                            bool* mismatch);

// The view of a block set this rank built (pack_block_set, merge_block_sets): nothing checked.
// `values`: where a set from block_set_head_of_whole keeps them (its tensor); else in `set`.
BlockSetView view_block_set(const std::vector<std::byte>& set, const BlockGeometry& g,
                            const void* values = nullptr);

// *out = the union of a and b, each block present in both combined as op(a, b), one present in
// one only as op(x, 0) (matters for min and max). Both partners of a recursive-doubling step
// call it with the same operands in the same order, so they get the same bytes.
void merge_block_sets(const BlockSetView& a, const BlockSetView& b, const BlockGeometry& g, ReduceOp op,
                      std::vector<std::byte>* out);

// The last merge of an allreduce, straight into the tensor: recv (g.count elements of dtype) =
// unpack_block_set of merge_block_sets(a, b), bit for bit, without the set in between (one pass
// over the values fewer). Only where the accumulators are the result's bytes (a 32-bit dtype,
// not avg); returns false, and writes nothing, elsewhere.
//
// `to_clear`, here and in unpack_block_set: null, every block absent from the result is written
// +0. Non-null where recv holds this rank's own input (an in-place call whose input is unchanged
// so far): a block absent from the result is absent from this rank's set too, so it is zero
// there already, and only the ones set in to_clear (scan_nonzero_blocks' signed_zero_bits: the
// zero blocks that hold a -0.0) are written. At 1% of 100 MiB that skips writing 98 MiB.
bool merge_block_sets_into(const BlockSetView& a, const BlockSetView& b, const BlockGeometry& g, DataType dtype,
                           ReduceOp op, void* recv, const std::uint64_t* to_clear = nullptr);

// merge_block_sets_into where this rank's own set is whole (block_set_head_of_whole) and the
// call is in place: recv holds this rank's values, and `other` (whose values, other_values, it
// may overwrite) is the left operand or the right one. The same bits, one pass over the values
// fewer than copying the two operands out first. Returns false, and writes nothing, where
// merge_block_sets_into would.
bool merge_block_set_into_whole(const BlockSetView& other, std::byte* other_values, bool other_is_left,
                                const BlockGeometry& g, DataType dtype, ReduceOp op, void* recv);

// recv (g.count elements of dtype) = the set's blocks narrowed (avg: divided by nranks), zero
// (+0) where a block is absent (`to_clear`: merge_block_sets_into).
void unpack_block_set(const BlockSetView& set, const BlockGeometry& g, DataType dtype, ReduceOp op,
                      std::uint32_t nranks, void* recv, const std::uint64_t* to_clear = nullptr);

}  // namespace sparcoll::algo
