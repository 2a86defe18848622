// Dense ring allreduce (Patarasuk & Yuan): a reduce-scatter ring in which every rank ends up
// owning one fully reduced chunk, then an allgather ring that passes the owned chunks around.
// 2(n-1)/n of the data per rank on the wire, n-1 latency terms per phase: the bandwidth-
// optimal choice for large dense tensors.
#include <cstring>

#include "algo/p2p_algorithms.hpp"
#include "block/reduce.hpp"

namespace sparcoll::algo {

namespace {

std::uint32_t mod(std::int64_t x, std::uint32_t n) { return static_cast<std::uint32_t>(((x % n) + n) % n); }

// Reduce-scatter over accumulators `acc` (count elements of acc_type). At step s rank r sends
// chunk (r - s + shift) and reduces chunk (r - s - 1 + shift) received from its left; after
// n-1 steps it owns chunk (r + 1 + shift), fully reduced. Tags [tag0, tag0 + n-1).
Task reduce_scatter_phase(p2p::Peers& peers, std::byte* acc, std::size_t count, DataType acc_type, ReduceOp op,
                          std::int64_t shift, std::uint32_t tag0) {
  const std::uint32_t n = peers.size(), r = peers.rank();
  const std::uint32_t right = (r + 1) % n, left = (r + n - 1) % n;
  const std::size_t es = block::acc_size(acc_type);
  for (std::uint32_t s = 0; s + 1 < n; ++s) {
    const std::uint32_t out = mod(std::int64_t{r} - s + shift, n), in = mod(std::int64_t{r} - s - 1 + shift, n);
    const std::size_t ob = chunk_begin(count, n, out), oe = chunk_begin(count, n, out + 1);
    const std::size_t ib = chunk_begin(count, n, in), ie = chunk_begin(count, n, in + 1);
    peers.send(right, tag0 + s, acc + ob * es, (oe - ob) * es);
    peers.recv_reduce(left, tag0 + s, acc + ib * es, ie - ib, acc_type, op);
    if (Status st = co_await peers.wait(); !st.ok()) co_return st;
  }
  co_return Status();
}

// Allgather of byte chunks: rank r starts with chunk (r + shift) complete in `buf`.
Task allgather_phase(p2p::Peers& peers, std::byte* buf, std::size_t count, std::size_t elem, std::int64_t shift,
                     std::uint32_t tag0) {
  const std::uint32_t n = peers.size(), r = peers.rank();
  const std::uint32_t right = (r + 1) % n, left = (r + n - 1) % n;
  for (std::uint32_t s = 0; s + 1 < n; ++s) {
    const std::uint32_t out = mod(std::int64_t{r} - s + shift, n), in = mod(std::int64_t{r} - s - 1 + shift, n);
    const std::size_t ob = chunk_begin(count, n, out), oe = chunk_begin(count, n, out + 1);
    const std::size_t ib = chunk_begin(count, n, in), ie = chunk_begin(count, n, in + 1);
    peers.send(right, tag0 + s, buf + ob * elem, (oe - ob) * elem);
    peers.recv(left, tag0 + s, buf + ib * elem, (ie - ib) * elem);
    if (Status st = co_await peers.wait(); !st.ok()) co_return st;
  }
  co_return Status();
}

// The accumulators for `count` elements: the output buffer itself when the dtype is its own
// accumulator type (f32, i32), else scratch.
std::byte* accumulators(void* recv, std::size_t count, DataType dtype, Scratch& scratch) {
  if (dtype == DataType::f32 || dtype == DataType::i32 || dtype_is_wide(dtype)) return static_cast<std::byte*>(recv);
  if (scratch.acc.size() < count * 4) scratch.acc.resize(count * 4);
  return scratch.acc.data();
}

}  // namespace

Task ring_allreduce(p2p::Peers& peers, const void* send, void* recv, std::size_t count, DataType dtype,
                    ReduceOp op, Scratch& scratch) {
  const std::uint32_t n = peers.size(), r = peers.rank();
  const DataType acc_type = p2p::acc_type_of(dtype);
  std::byte* acc = accumulators(recv, count, dtype, scratch);
  if (acc != send) block::acc_load(dtype, send, acc, count);
  if (n > 1) {
    if (Status s = co_await reduce_scatter_phase(peers, acc, count, acc_type, op, 0, 0); !s.ok()) co_return s;
  }
  // Round (and divide, for avg) the owned chunk once; everyone else receives these bytes.
  const std::uint32_t own = (r + 1) % n;
  const std::size_t b = chunk_begin(count, n, own), e = chunk_begin(count, n, own + 1);
  const std::size_t esize = dtype_size(dtype);
  block::acc_store(dtype, op, acc + b * block::acc_size(acc_type), e - b, n, static_cast<std::byte*>(recv) + b * esize);
  if (n == 1) co_return Status();
  co_return co_await allgather_phase(peers, static_cast<std::byte*>(recv), count, esize, 1, n - 1);
}

Task ring_reduce_scatter(p2p::Peers& peers, const void* send, void* recv, std::size_t count, DataType dtype,
                         ReduceOp op, Scratch& scratch) {
  const std::uint32_t n = peers.size(), r = peers.rank();
  const std::size_t total = count * n, es = block::acc_size(dtype);
  if (scratch.acc.size() < total * es) scratch.acc.resize(total * es);
  std::byte* acc = scratch.acc.data();
  block::acc_load(dtype, send, acc, total);
  if (n > 1) {
    if (Status s = co_await reduce_scatter_phase(peers, acc, total, p2p::acc_type_of(dtype), op, -1, 0); !s.ok())
      co_return s;
  }
  block::acc_store(dtype, op, acc + std::size_t{r} * count * es, count, n, recv);
  co_return Status();
}

// The reduce-scatter ring leaves rank p owning chunk p (shift -1), fully reduced; each rank
// rounds its chunk once and sends it to the root, which then commits (as gather does, rooted.cpp):
// no rank returns success unless every rank took part alike, and a root that differs across
// ranks is a mismatch in the first ring step (every fragment carries its sender's root).
// Bandwidth-optimal like the ring allreduce, with half its steps.
Task ring_reduce(p2p::Peers& peers, const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op,
                 std::uint32_t root, Scratch& scratch) {
  const std::uint32_t n = peers.size(), r = peers.rank();
  const std::size_t esize = dtype_size(dtype), es = block::acc_size(dtype);
  if (scratch.acc.size() < count * es) scratch.acc.resize(count * es);
  std::byte* acc = scratch.acc.data();
  block::acc_load(dtype, send, acc, count);
  if (n > 1) {
    if (Status s = co_await reduce_scatter_phase(peers, acc, count, p2p::acc_type_of(dtype), op, -1, 0); !s.ok())
      co_return s;
  }
  const std::uint32_t data_tag = n - 1, commit_tag = n;
  const std::size_t b = chunk_begin(count, n, r), e = chunk_begin(count, n, r + 1);
  if (r != root) {
    if (scratch.tmp.size() < (e - b) * esize) scratch.tmp.resize((e - b) * esize);
    block::acc_store(dtype, op, acc + b * es, e - b, n, scratch.tmp.data());
    peers.send(root, data_tag, scratch.tmp.data(), (e - b) * esize);
    peers.recv(root, commit_tag, nullptr, 0);
    co_return co_await peers.wait();
  }
  auto* out = static_cast<std::byte*>(recv);
  block::acc_store(dtype, op, acc + b * es, e - b, n, out + b * esize);
  for (std::uint32_t p = 0; p < n; ++p) {
    if (p == root) continue;
    const std::size_t pb = chunk_begin(count, n, p), pe = chunk_begin(count, n, p + 1);
    peers.recv(p, data_tag, out + pb * esize, (pe - pb) * esize);
  }
  if (Status s = co_await peers.wait(); !s.ok()) co_return s;
  for (std::uint32_t p = 0; p < n; ++p)
    if (p != root) peers.send(p, commit_tag, nullptr, 0);
  co_return co_await peers.wait();
}

Task ring_allgather(p2p::Peers& peers, const void* send, void* recv, std::size_t bytes) {
  const std::uint32_t n = peers.size(), r = peers.rank();
  auto* out = static_cast<std::byte*>(recv);
  if (bytes != 0 && out + std::size_t{r} * bytes != send) std::memmove(out + std::size_t{r} * bytes, send, bytes);
  if (n == 1) co_return Status();
  co_return co_await allgather_phase(peers, out, bytes * n, 1, 0, 0);
}

}  // namespace sparcoll::algo
