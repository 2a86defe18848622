// The reading side of block sets (block_set.hpp): the checks on a peer's bytes, kept apart from
// the kernels so the fuzz target (tests/fuzz/fuzz_block_set.cpp) builds with this file alone.
#include <bit>
#include <cstring>

#include "algo/block_set.hpp"

namespace sparcoll::algo {

std::size_t block_set_value_bytes(const BlockGeometry& g, std::size_t present, bool last_present) noexcept {
  if (present == 0) return 0;
  std::size_t elems = present * g.block_elems;
  if (last_present) elems -= g.block_elems - g.elems_of(g.blocks() - 1);
  return elems * 4;
}

std::string parse_block_set(const std::byte* bytes, std::size_t size, const BlockGeometry& g, BlockSetView* view,
                            bool* mismatch) {
  *mismatch = false;
  BlockSetHeader h;
  if (size < sizeof h) return std::to_string(size) + " bytes, fewer than a block set's header";
  std::memcpy(&h, bytes, sizeof h);
  if (h.magic != kBlockSetMagic || h.version != kBlockSetVersion || h.reserved != 0)
    return "a message that is not a block set (magic, version)";
  if (h.count != g.count || h.block_elems != g.block_elems || h.acc_type != static_cast<std::uint8_t>(g.acc_type)) {
    *mismatch = true;
    const auto acc = [](std::uint8_t t) {
      return dtype_valid(t) ? std::string(dtype_name(static_cast<DataType>(t))) : "type " + std::to_string(t);
    };
    return "a block set of " + std::to_string(h.count) + " elements (blocks of " + std::to_string(h.block_elems) +
           ", " + acc(h.acc_type) + " accumulators), this rank has " + std::to_string(g.count) + " (blocks of " +
           std::to_string(g.block_elems) + ", " + acc(static_cast<std::uint8_t>(g.acc_type)) + ")";
  }
  const std::size_t words = g.words(), nblocks = g.blocks();
  if (size - sizeof h < words * 8) return "a block set whose bitmap is cut short";
  const std::byte* bitmap = bytes + sizeof h;
  // The words are read with memcpy: nothing here assumes the message's alignment.
  std::size_t present = 0;
  std::uint64_t word = 0;
  for (std::size_t w = 0; w < words; ++w) {
    std::memcpy(&word, bitmap + w * 8, 8);
    present += static_cast<std::size_t>(std::popcount(word));
  }
  if (nblocks % 64 != 0 && word >> (nblocks % 64) != 0) return "a block set with blocks beyond the tensor's end";
  if (present != h.present)
    return "a block set whose header counts " + std::to_string(h.present) + " blocks and its bitmap " +
           std::to_string(present);
  const bool last_present = nblocks > 0 && ((word >> ((nblocks - 1) % 64)) & 1);
  const std::size_t expected = block_set_value_bytes(g, present, last_present);
  if (size - sizeof h - words * 8 != expected)
    return "a block set of " + std::to_string(size) + " bytes where its " + std::to_string(present) + " blocks take " +
           std::to_string(sizeof h + words * 8 + expected);
  // The view reads the words in place: messages are received into buffers from operator new
  // (16-byte aligned) and the bitmap starts at offset 24.
  if (reinterpret_cast<std::uintptr_t>(bitmap) % alignof(std::uint64_t) != 0)
    return "a block set at a misaligned address";
  view->bits = reinterpret_cast<const std::uint64_t*>(bitmap);
  view->values = bitmap + words * 8;
  view->present = present;
  return std::string();
}

BlockSetView view_block_set(const std::vector<std::byte>& set, const BlockGeometry& g, const void* values) {
  BlockSetHeader h;
  std::memcpy(&h, set.data(), sizeof h);
  BlockSetView view;
  view.bits = reinterpret_cast<const std::uint64_t*>(set.data() + sizeof h);
  view.values = values != nullptr ? static_cast<const std::byte*>(values) : set.data() + sizeof h + g.words() * 8;
  view.present = h.present;
  return view;
}

}  // namespace sparcoll::algo
