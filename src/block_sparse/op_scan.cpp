#include "block_sparse/op_scan.hpp"

#include <bit>
#include <cstring>

#include "block/bitmap.hpp"

namespace sparcoll::block_sparse {

void scan_op_blocks(OpState& op, std::size_t count, std::size_t first_block, std::size_t end_block,
                    std::vector<std::uint64_t>* signed_zero) {
  if (first_block >= end_block) return;
  const DataType dtype = op.geometry.dtype;
  const std::uint32_t block_elems = op.geometry.block_elems;
  const std::size_t esize = dtype_size(dtype);
  const std::size_t begin = first_block * block_elems, end = std::min(count, end_block * block_elems);
  const std::size_t first_word = first_block / 64, words = block::bitmap_words(end_block - first_block);
  std::uint64_t* zero_bits = nullptr;
  if (op.in_place) {
    signed_zero->assign(words, 0);
    zero_bits = signed_zero->data();
  }
  block::scan_nonzero_blocks(op.send + begin * esize, end - begin, dtype, block_elems, op.bitmap.data() + first_word,
                             zero_bits);
  if (zero_bits == nullptr) return;
  const std::size_t full = std::size_t{block_elems} * esize;
  for (std::size_t w = 0; w < words; ++w)
    for (std::uint64_t bits = zero_bits[w]; bits != 0; bits &= bits - 1) {
      const std::size_t b = first_block + w * 64 + static_cast<std::size_t>(std::countr_zero(bits));
      std::memset(op.recv + b * full, 0, std::min(full, count * esize - b * full));
    }
}

}  // namespace sparcoll::block_sparse
