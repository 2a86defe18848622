#include "algo/block_set.hpp"

#include <bit>
#include <cstring>

#include "block/reduce.hpp"

namespace sparcoll::algo {
namespace {

bool test(const std::uint64_t* bits, std::size_t b) noexcept { return (bits[b / 64] >> (b % 64)) & 1; }

// The first block at or after `from` whose bit is set in word_at(w), the bitmap's word w (or
// nblocks), word by word.
template <class WordAt>
std::size_t next_set_block(WordAt word_at, std::size_t from, std::size_t nblocks) noexcept {
  const std::size_t words = (nblocks + 63) / 64;
  std::size_t w = from / 64;
  if (w >= words) return nblocks;
  std::uint64_t word = word_at(w) & (~std::uint64_t{0} << (from % 64));
  while (word == 0) {
    if (++w >= words) return nblocks;
    word = word_at(w);
  }
  const std::size_t b = w * 64 + static_cast<std::size_t>(std::countr_zero(word));
  return b < nblocks ? b : nblocks;
}

// The first block at or after `from` whose bit is `set` (or nblocks).
std::size_t next_block(const std::uint64_t* bits, std::size_t from, std::size_t nblocks, bool set) noexcept {
  const std::uint64_t flip = set ? 0 : ~std::uint64_t{0};
  return next_set_block([&](std::size_t w) { return bits[w] ^ flip; }, from, nblocks);
}

// The first block at or after `from` set in a or in b (or nblocks).
std::size_t next_in_either(const std::uint64_t* a, const std::uint64_t* b, std::size_t from,
                           std::size_t nblocks) noexcept {
  return next_set_block([&](std::size_t w) { return a[w] | b[w]; }, from, nblocks);
}

// Elements of blocks [first, end).
std::size_t elems_of_run(const BlockGeometry& g, std::size_t first, std::size_t end) noexcept {
  const std::size_t stop = end * g.block_elems;
  return (stop < g.count ? stop : g.count) - first * g.block_elems;
}

// Blocks [first, end), absent from the result, set to +0 in `out` (elements of esize bytes): all
// of them, or only those set in `to_clear` (merge_block_sets_into says when that suffices).
void clear_absent(std::byte* out, std::size_t esize, const BlockGeometry& g, std::size_t first, std::size_t end,
                  const std::uint64_t* to_clear) noexcept {
  if (to_clear == nullptr) {
    std::memset(out + first * g.block_elems * esize, 0, elems_of_run(g, first, end) * esize);
    return;
  }
  for (std::size_t s = next_block(to_clear, first, end, true); s < end;) {
    const std::size_t e = next_block(to_clear, s, end, false);
    std::memset(out + s * g.block_elems * esize, 0, elems_of_run(g, s, e) * esize);
    s = next_block(to_clear, e, end, true);
  }
}

// Sizes *out for a set of `present` blocks, with value_bytes of their values after the bitmap
// (0: the values are sent from elsewhere), and writes its header; returns where the bitmap goes.
std::byte* start_set(const BlockGeometry& g, std::size_t present, std::size_t value_bytes,
                     std::vector<std::byte>* out) {
  out->resize(sizeof(BlockSetHeader) + g.words() * 8 + value_bytes);
  const BlockSetHeader h{kBlockSetMagic, kBlockSetVersion, static_cast<std::uint8_t>(g.acc_type), 0, g.block_elems,
                         static_cast<std::uint32_t>(present), g.count};
  std::memcpy(out->data(), &h, sizeof h);
  return out->data() + sizeof h;
}

std::size_t popcount(const std::uint64_t* bits, std::size_t words) noexcept {
  std::size_t n = 0;
  for (std::size_t w = 0; w < words; ++w) n += static_cast<std::size_t>(std::popcount(bits[w]));
  return n;
}

}  // namespace

void pack_block_set(const void* data, DataType dtype, const std::uint64_t* bits, const BlockGeometry& g,
                    std::vector<std::byte>* out) {
  const std::size_t nblocks = g.blocks(), words = g.words(), esize = dtype_size(dtype);
  const std::size_t present = popcount(bits, words);
  std::byte* at = start_set(g, present, block_set_value_bytes(g, present, nblocks > 0 && test(bits, nblocks - 1)), out);
  if (words > 0) std::memcpy(at, bits, words * 8);
  at += words * 8;
  const auto* src = static_cast<const std::byte*>(data);
  // One widening call per run of present blocks: they are contiguous in the tensor and in the set.
  for (std::size_t b = next_block(bits, 0, nblocks, true); b < nblocks;) {
    const std::size_t e = next_block(bits, b, nblocks, false);
    const std::size_t n = elems_of_run(g, b, e);
    block::acc_load(dtype, src + b * g.block_elems * esize, at, n);
    at += n * 4;
    b = next_block(bits, e, nblocks, true);
  }
}

bool block_set_head_of_whole(DataType dtype, const std::uint64_t* bits, const BlockGeometry& g,
                             std::vector<std::byte>* head) {
  const std::size_t nblocks = g.blocks(), words = g.words();
  if (nblocks == 0 || dtype != g.acc_type || popcount(bits, words) != nblocks) return false;
  std::memcpy(start_set(g, nblocks, 0, head), bits, words * 8);
  return true;
}

namespace {

// The union of a and b, run by run (runs of blocks of one kind: in both, in a only, in b only;
// their values are contiguous in a and b, so each run is one kernel call): place(first, end)
// says where the values of blocks [first, end) go, gap(first, end) is told of blocks in neither.
template <class Place, class Gap>
void merge_runs(const BlockSetView& a, const BlockSetView& b, const BlockGeometry& g, ReduceOp op, Place place,
                Gap gap) {
  const std::size_t nblocks = g.blocks();
  const std::byte* pa = a.values;
  const std::byte* pb = b.values;
  std::size_t blk = 0;
  while (blk < nblocks) {
    const bool in_a = test(a.bits, blk), in_b = test(b.bits, blk);
    if (!in_a && !in_b) {  // most of a sparse tensor: skipped a word at a time
      const std::size_t end = next_in_either(a.bits, b.bits, blk + 1, nblocks);
      gap(blk, end);
      blk = end;
      continue;
    }
    std::size_t end = blk + 1;
    while (end < nblocks && test(a.bits, end) == in_a && test(b.bits, end) == in_b) ++end;
    const std::size_t n = elems_of_run(g, blk, end);
    std::byte* dst = place(blk, end);
    if (in_a && in_b) {
      std::memcpy(dst, pa, n * 4);
      block::acc_reduce(g.acc_type, op, pb, dst, n);  // dst = op(a, b)
      pa += n * 4;
      pb += n * 4;
    } else {
      const std::byte*& src = in_a ? pa : pb;
      std::memcpy(dst, src, n * 4);
      block::acc_reduce_zero(g.acc_type, op, dst, n);  // op(x, 0); nothing for sum and avg
      src += n * 4;
    }
    blk = end;
  }
}

}  // namespace

void merge_block_sets(const BlockSetView& a, const BlockSetView& b, const BlockGeometry& g, ReduceOp op,
                      std::vector<std::byte>* out) {
  const std::size_t nblocks = g.blocks(), words = g.words();
  // The union's bitmap first (its popcount sizes the message), then the values run by run.
  std::size_t present = 0;
  for (std::size_t w = 0; w < words; ++w) present += static_cast<std::size_t>(std::popcount(a.bits[w] | b.bits[w]));
  const bool last_present = nblocks > 0 && (test(a.bits, nblocks - 1) || test(b.bits, nblocks - 1));
  std::byte* at = start_set(g, present, block_set_value_bytes(g, present, last_present), out);
  for (std::size_t w = 0; w < words; ++w) {
    const std::uint64_t u = a.bits[w] | b.bits[w];
    std::memcpy(at + w * 8, &u, 8);
  }
  std::byte* dst = at + words * 8;
  merge_runs(
      a, b, g, op,
      [&](std::size_t first, std::size_t end) {
        std::byte* here = dst;
        dst += elems_of_run(g, first, end) * 4;
        return here;
      },
      [](std::size_t, std::size_t) {});
}

bool merge_block_sets_into(const BlockSetView& a, const BlockSetView& b, const BlockGeometry& g, DataType dtype,
                           ReduceOp op, void* recv, const std::uint64_t* to_clear) {
  if (dtype != g.acc_type || op == ReduceOp::avg) return false;  // the accumulators are not the result's bytes
  auto* out = static_cast<std::byte*>(recv);
  const std::size_t block_bytes = std::size_t{g.block_elems} * 4;
  merge_runs(
      a, b, g, op, [&](std::size_t first, std::size_t) { return out + first * block_bytes; },
      [&](std::size_t first, std::size_t end) { clear_absent(out, 4, g, first, end, to_clear); });
  return true;
}

bool merge_block_set_into_whole(const BlockSetView& other, std::byte* other_values, bool other_is_left,
                                const BlockGeometry& g, DataType dtype, ReduceOp op, void* recv) {
  if (dtype != g.acc_type || op == ReduceOp::avg) return false;
  auto* out = static_cast<std::byte*>(recv);
  const std::size_t nblocks = g.blocks(), block_bytes = std::size_t{g.block_elems} * 4;
  std::byte* theirs = other_values;
  for (std::size_t b = 0; b < nblocks;) {
    // Blocks this rank has alone: op(x, 0), as merge_runs gives them.
    const std::size_t s = next_block(other.bits, b, nblocks, true);
    if (s > b) block::acc_reduce_zero(g.acc_type, op, out + b * block_bytes, elems_of_run(g, b, s));
    if (s == nblocks) break;
    const std::size_t e = next_block(other.bits, s, nblocks, false);
    const std::size_t n = elems_of_run(g, s, e);
    std::byte* mine = out + s * block_bytes;
    if (other_is_left) {
      block::acc_reduce(g.acc_type, op, mine, theirs, n);  // theirs = op(theirs, mine)
      std::memcpy(mine, theirs, n * 4);
    } else {
      block::acc_reduce(g.acc_type, op, theirs, mine, n);  // mine = op(mine, theirs)
    }
    theirs += n * 4;
    b = e;
  }
  return true;
}

void unpack_block_set(const BlockSetView& set, const BlockGeometry& g, DataType dtype, ReduceOp op,
                      std::uint32_t nranks, void* recv, const std::uint64_t* to_clear) {
  const std::size_t nblocks = g.blocks(), esize = dtype_size(dtype);
  auto* out = static_cast<std::byte*>(recv);
  const std::byte* values = set.values;
  for (std::size_t b = 0; b < nblocks;) {
    const std::size_t s = next_block(set.bits, b, nblocks, true);
    if (s > b) clear_absent(out, esize, g, b, s, to_clear);
    if (s == nblocks) break;
    const std::size_t e = next_block(set.bits, s, nblocks, false);
    const std::size_t n = elems_of_run(g, s, e);
    block::acc_store(dtype, op, values, n, nranks, out + s * g.block_elems * esize);
    values += n * 4;
    b = e;
  }
}

}  // namespace sparcoll::algo
