// Latency-optimal allreduce for small tensors: recursive doubling. In step k every rank
// exchanges its whole accumulator with the rank whose (virtual) number differs in bit k and
// combines the two: log2(n) message latencies in all, where the ring pays 2(n-1) and
// block-sparse a round per lane. With n not a power of two, the first 2e ranks (e = n - 2^m)
// pair up first: each even one hands its values to the odd one and gets the result back at the
// end (two more latencies for them).
//
// Determinism: a pair always combines as op(lower virtual rank's values, higher's), so both
// partners compute the same bits (min/max of -0 and +0, or of two NaNs, depend on the order),
// and after step k every rank of a group of 2^(k+1) holds the same bits: results are bitwise
// identical on every rank and across runs.
#include <cstring>

#include "algo/p2p_algorithms.hpp"
#include "block/reduce.hpp"

namespace sparcoll::algo {
namespace {

constexpr std::uint32_t kFoldTag = 0;
constexpr std::uint32_t kStepTag = 1;    // + step
constexpr std::uint32_t kUnfoldTag = 64;

}  // namespace

Task recursive_doubling_allreduce(p2p::Peers& peers, const void* send, void* recv, std::size_t count,
                                  DataType dtype, ReduceOp op, Scratch& scratch) {
  const std::uint32_t n = peers.size(), r = peers.rank();
  const DataType acc_type = p2p::acc_type_of(dtype);
  const std::size_t acc_bytes = count * block::acc_size(acc_type);
  if (scratch.acc.size() < acc_bytes) scratch.acc.resize(acc_bytes);
  if (scratch.tmp.size() < acc_bytes) scratch.tmp.resize(acc_bytes);
  std::byte* acc = scratch.acc.data();
  std::byte* theirs = scratch.tmp.data();
  block::acc_load(dtype, send, acc, count);

  std::uint32_t pow2 = 1;
  while (pow2 * 2 <= n) pow2 *= 2;
  const std::uint32_t extra = n - pow2;
  // The first 2*extra ranks fold in pairs: the even one leaves until the end.
  if (r < 2 * extra && r % 2 == 0) {
    peers.send(r + 1, kFoldTag, acc, acc_bytes);
    peers.recv(r + 1, kUnfoldTag, recv, count * dtype_size(dtype));
    co_return co_await peers.wait();
  }
  if (r < 2 * extra) {
    // acc = op(rank r-1's values, ours): the lower rank on the left.
    peers.recv(r - 1, kFoldTag, theirs, acc_bytes);
    if (Status s = co_await peers.wait(); !s.ok()) co_return s;
    block::acc_reduce(acc_type, op, acc, theirs, count);
    std::swap(acc, theirs);
  }
  const std::uint32_t vr = r < 2 * extra ? r / 2 : r - extra;
  auto real = [extra](std::uint32_t v) { return v < extra ? 2 * v + 1 : v + extra; };
  for (std::uint32_t mask = 1, step = 0; mask < pow2; mask <<= 1, ++step) {
    const std::uint32_t partner = vr ^ mask;
    peers.send(real(partner), kStepTag + step, acc, acc_bytes);
    peers.recv(real(partner), kStepTag + step, theirs, acc_bytes);
    if (Status s = co_await peers.wait(); !s.ok()) co_return s;
    if (partner > vr) {
      block::acc_reduce(acc_type, op, theirs, acc, count);  // acc = op(ours, theirs)
    } else {
      block::acc_reduce(acc_type, op, acc, theirs, count);  // theirs = op(theirs, ours)
      std::swap(acc, theirs);
    }
  }
  block::acc_store(dtype, op, acc, count, n, recv);
  if (r < 2 * extra) {
    peers.send(r - 1, kUnfoldTag, recv, count * dtype_size(dtype));
    co_return co_await peers.wait();
  }
  co_return Status();
}

}  // namespace sparcoll::algo
