// Block recursive doubling: recursive doubling in which every message is a block set (the
// sender's non-zero blocks, block_set.hpp) instead of the whole tensor. In step k every rank
// swaps its set with the rank whose (virtual) number differs in bit k and merges the two, so a
// message carries the union of the 2^k ranks' blocks seen so far: log2(n) message latencies, as
// dense recursive doubling, and bytes that shrink with the density (2 ranks at 26% density send
// a quarter of what the ring sends). Where the data are dense it moves what dense recursive
// doubling moves; the hybrid picks it for tensors too small for the lanes of block-sparse
// aggregation when the ranks' densities make it cheaper than the ring (hybrid_plan.hpp).
//
// A rank count that is not a power of two is folded first, as in recursive_doubling.cpp: each
// even rank below 2*rem hands its set to the next odd rank and gets the result back at the end.
//
// Bitwise identity: both partners of a step hold the same two sets (bit copies) and merge them in
// the same order, the lower virtual rank's on the left, so the result is one fixed tree of
// operations, identical on every rank and run; a block zero on every rank comes out +0.
#include <bit>
#include <utility>

#include "algo/block_set.hpp"
#include "algo/p2p_algorithms.hpp"
#include "block/bitmap.hpp"

namespace sparcoll::algo {
namespace {

constexpr std::uint32_t kFoldTag = 0;
constexpr std::uint32_t kStepTag = 1;  // + step
constexpr std::uint32_t kUnfoldTag = 64;

}  // namespace

Task block_recursive_doubling_allreduce(p2p::Peers& peers, const void* send, void* recv, std::size_t count,
                                        DataType dtype, ReduceOp op, std::uint32_t block_elems, Scratch& scratch) {
  const std::uint32_t n = peers.size(), r = peers.rank();
  const BlockGeometry g{count, block_elems, p2p::acc_type_of(dtype)};
  if (g.blocks() > UINT32_MAX)
    co_return Status(ErrorCode::invalid_argument, peers.what() + ": " + std::to_string(count) + " elements make " +
                                                      std::to_string(g.blocks()) +
                                                      " blocks, more than a block set counts (2^32 - 1)");
  std::vector<std::uint64_t>& bits = scratch.sparse.bits;
  bits.assign(g.words() + 1, 0);  // +1: never empty
  // In place, recv keeps this rank's input until the result is written into it, and a block
  // absent from the result is zero there already: only its zero blocks holding a -0.0 need
  // writing (to_clear, block_set.hpp). Out of place, every absent block is written.
  std::uint64_t* to_clear = nullptr;
  if (send == recv) {
    scratch.sparse.signed_zero_bits.assign(g.words() + 1, 0);
    to_clear = scratch.sparse.signed_zero_bits.data();
  }
  block::scan_nonzero_blocks(send, count, dtype, block_elems, bits.data(), to_clear);
  std::vector<std::byte>* cur = &scratch.tmp;
  std::vector<std::byte>* spare = &scratch.tmp2;
  std::vector<std::byte>& received = scratch.tmp3;
  // The result's blocks, for the caller (SparseScratch::union_bits).
  std::vector<std::uint64_t>& union_bits = scratch.sparse.union_bits;
  const auto keep_union = [&](const BlockSetView& a, const BlockSetView* b) {
    union_bits.resize(g.words());
    for (std::size_t w = 0; w < g.words(); ++w) union_bits[w] = a.bits[w] | (b != nullptr ? b->bits[w] : 0);
  };
  // *cur is the set this rank sends and merges next: its own, then each step's union. Its own,
  // where that is the tensor's bytes unchanged (every block present, f32 or i32), is only the
  // header and bitmap in *cur, followed on the wire by `send` itself: on dense data a copy of
  // the tensor fewer, which is most of what this algorithm adds to dense recursive doubling.
  const void* own_values = nullptr;
  if (n > 1 && block_set_head_of_whole(dtype, bits.data(), g, cur))
    own_values = send;
  else
    pack_block_set(send, dtype, bits.data(), g, cur);
  const auto send_cur = [&](std::uint32_t to, std::uint32_t tag) {
    if (own_values != nullptr)
      peers.send(to, tag, cur->data(), cur->size(), own_values, g.count * 4);
    else
      peers.send(to, tag, cur->data(), cur->size());
  };
  const auto view_cur = [&] { return view_block_set(*cur, g, own_values); };
  // After a merge *cur is the union, its values packed in it.
  const auto merged = [&] {
    std::swap(cur, spare);
    own_values = nullptr;
  };

  auto parse = [&](const std::vector<std::byte>& bytes, std::uint32_t from, const char* step, BlockSetView* view) {
    bool mismatch = false;
    const std::string problem = parse_block_set(bytes.data(), bytes.size(), g, view, &mismatch);
    if (problem.empty()) return Status();
    return Status(mismatch ? ErrorCode::mismatch : ErrorCode::protocol_error,
                  peers.what() + " " + step + ": rank " + std::to_string(from) + " sent " + problem);
  };

  const std::uint32_t pow2 = std::bit_floor(n), rem = n - pow2;
  if (r < 2 * rem && r % 2 == 0) {
    // Folded out: hand the set to r + 1, take the finished one back.
    send_cur(r + 1, kFoldTag);
    peers.recv_any(r + 1, kUnfoldTag, &received, g.max_bytes());
    if (Status s = co_await peers.wait(); !s.ok()) co_return s;
    BlockSetView result;
    if (Status s = parse(received, r + 1, "(unfold)", &result); !s.ok()) co_return s;
    unpack_block_set(result, g, dtype, op, n, recv, to_clear);
    keep_union(result, nullptr);
    co_return Status();
  }
  if (r < 2 * rem) {
    peers.recv_any(r - 1, kFoldTag, &received, g.max_bytes());
    if (Status s = co_await peers.wait(); !s.ok()) co_return s;
    BlockSetView theirs;
    if (Status s = parse(received, r - 1, "(fold)", &theirs); !s.ok()) co_return s;
    merge_block_sets(theirs, view_cur(), g, op, spare);  // the lower rank on the left
    merged();
  }
  const std::uint32_t me = r < 2 * rem ? r / 2 : r - rem;
  auto real = [rem](std::uint32_t v) { return v < rem ? 2 * v + 1 : v + rem; };
  for (std::uint32_t mask = 1, step = 0; mask < pow2; mask <<= 1, ++step) {
    const std::uint32_t partner = real(me ^ mask);
    send_cur(partner, kStepTag + step);
    peers.recv_any(partner, kStepTag + step, &received, g.max_bytes());
    if (Status s = co_await peers.wait(); !s.ok()) co_return s;
    BlockSetView theirs;
    if (Status s = parse(received, partner, "(step)", &theirs); !s.ok()) co_return s;
    const BlockSetView mine = view_cur();
    const BlockSetView& left = (me & mask) == 0 ? mine : theirs;
    const BlockSetView& right = (me & mask) == 0 ? theirs : mine;
    // The last step of a rank no folded rank waits for: the union straight into recv. Where
    // this rank's own set is still whole (its first step is its last) and the call is in place,
    // recv holds its values already: the partner's set is merged there.
    if ((mask << 1) == pow2 && r >= 2 * rem) {
      keep_union(left, &right);
      if (own_values == recv) {
        std::byte* theirs_values = received.data() + (theirs.values - received.data());
        if (merge_block_set_into_whole(theirs, theirs_values, (me & mask) != 0, g, dtype, op, recv))
          co_return Status();
      } else if (merge_block_sets_into(left, right, g, dtype, op, recv, to_clear)) {
        co_return Status();
      }
    }
    merge_block_sets(left, right, g, op, spare);
    merged();
  }
  if (r < 2 * rem) {
    peers.send(r - 1, kUnfoldTag, cur->data(), cur->size());
    if (Status s = co_await peers.wait(); !s.ok()) co_return s;
  }
  unpack_block_set(view_cur(), g, dtype, op, n, recv, to_clear);
  keep_union(view_cur(), nullptr);
  co_return Status();
}

}  // namespace sparcoll::algo
