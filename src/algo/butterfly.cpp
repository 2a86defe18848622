// Dense butterfly allreduce (Rabenseifner): reduce-scatter by recursive halving, then allgather
// by recursive doubling, 2 log2(p) latency terms and 2(p-1)/p of the data per rank: better than
// the ring when messages are small enough for latency to matter.
//
// A rank count n that is not a power of two is folded first (Thakur, Rabenseifner & Gropp):
// with p the largest power of two <= n and rem = n - p, each even rank below 2*rem hands its
// vector to the next odd rank and sits out; the p remaining ranks run the butterfly; the odd
// ranks then hand the result back.
#include <bit>
#include <cstring>

#include "algo/p2p_algorithms.hpp"
#include "block/reduce.hpp"

namespace sparcoll::algo {

namespace {
constexpr std::uint32_t kTagFold = 0, kTagHalving = 1, kTagDoubling = 64, kTagUnfold = 128;
}  // namespace

Task butterfly_allreduce(p2p::Peers& peers, const void* send, void* recv, std::size_t count, DataType dtype,
                         ReduceOp op, Scratch& scratch) {
  const std::uint32_t n = peers.size(), r = peers.rank();
  const DataType acc_type = p2p::acc_type_of(dtype);
  const std::size_t esize = dtype_size(dtype);
  auto* out = static_cast<std::byte*>(recv);
  const std::size_t es = block::acc_size(acc_type);
  std::byte* acc = out;
  if (acc_type != dtype) {  // f16, bf16: fp32 accumulators beside the output
    if (scratch.acc.size() < count * es) scratch.acc.resize(count * es);
    acc = scratch.acc.data();
  }
  if (acc != send) block::acc_load(dtype, send, acc, count);

  const std::uint32_t p = std::bit_floor(n), rem = n - p;
  // Fold: an even rank below 2*rem gives its accumulators to r + 1 and waits for the result.
  if (r < 2 * rem && r % 2 == 0) {
    peers.send(r + 1, kTagFold, acc, count * es);
    if (Status s = co_await peers.wait(); !s.ok()) co_return s;
    peers.recv(r + 1, kTagUnfold, out, count * esize);
    co_return co_await peers.wait();
  }
  if (r < 2 * rem) {
    peers.recv_reduce(r - 1, kTagFold, acc, count, acc_type, op);
    if (Status s = co_await peers.wait(); !s.ok()) co_return s;
  }
  const std::uint32_t me = r < 2 * rem ? r / 2 : r - rem;  // rank among the p butterfly ranks
  auto real = [rem](std::uint32_t v) { return v < rem ? 2 * v + 1 : v + rem; };

  // Recursive halving: keep the half of [lo, hi) on this rank's side of bit d, send the other.
  std::size_t lo = 0, hi = count;
  std::size_t los[32], his[32];
  std::uint32_t steps = 0;
  for (std::uint32_t d = p / 2; d >= 1; d /= 2, ++steps) {
    const std::uint32_t partner = real(me ^ d);
    const std::size_t mid = lo + (hi - lo) / 2;
    los[steps] = lo;
    his[steps] = hi;
    const bool low = (me & d) == 0;
    const std::size_t keep_lo = low ? lo : mid, keep_hi = low ? mid : hi;
    const std::size_t give_lo = low ? mid : lo, give_hi = low ? hi : mid;
    peers.send(partner, kTagHalving + steps, acc + give_lo * es, (give_hi - give_lo) * es);
    peers.recv_reduce(partner, kTagHalving + steps, acc + keep_lo * es, keep_hi - keep_lo, acc_type, op);
    if (Status s = co_await peers.wait(); !s.ok()) co_return s;
    lo = keep_lo;
    hi = keep_hi;
  }
  // This rank's range is complete: round it once.
  block::acc_store(dtype, op, acc + lo * es, hi - lo, n, out + lo * esize);

  // Recursive doubling: exchange finished halves back up the same tree.
  for (std::uint32_t i = steps; i-- > 0;) {
    const std::uint32_t d = p >> (i + 1);
    const std::uint32_t partner = real(me ^ d);
    const std::size_t plo = los[i], phi = his[i], mid = plo + (phi - plo) / 2;
    const bool low = (me & d) == 0;
    const std::size_t other_lo = low ? mid : plo, other_hi = low ? phi : mid;
    peers.send(partner, kTagDoubling + i, out + lo * esize, (hi - lo) * esize);
    peers.recv(partner, kTagDoubling + i, out + other_lo * esize, (other_hi - other_lo) * esize);
    if (Status s = co_await peers.wait(); !s.ok()) co_return s;
    lo = plo;
    hi = phi;
  }
  if (r < 2 * rem) {
    peers.send(r - 1, kTagUnfold, out, count * esize);
    co_return co_await peers.wait();
  }
  co_return Status();
}

}  // namespace sparcoll::algo
