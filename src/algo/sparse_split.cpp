#include "algo/sparse_split.hpp"

#include <cstring>

#include "block/reduce.hpp"

namespace sparcoll::algo::split {

namespace {
constexpr std::uint32_t kTagSplit = 0, kTagGather = 1;

Status bad_message(const p2p::Peers& peers, std::uint32_t from, const char* step, const std::string& problem,
                   bool range_differs) {
  // A different range means a different dim on that rank: a usage error every rank fails on,
  // not a corrupt stream.
  return Status(range_differs ? ErrorCode::mismatch : ErrorCode::protocol_error,
                peers.what() + " " + step + ": rank " + std::to_string(from) + " sent " + problem);
}
}  // namespace

Task exchange(p2p::Peers& peers, const SparseVector& local, std::size_t dim, DataType acc_type, SparseScratch& s) {
  const std::uint32_t n = peers.size(), r = peers.rank();
  s.in.resize(n);
  s.out.resize(n);
  s.pieces.resize(n);
  const SparseSpan all = span_of(local);
  std::size_t lo = 0;
  for (std::uint32_t j = 0; j < n; ++j) {
    const std::size_t b = chunk_begin(dim, n, j), e = chunk_begin(dim, n, j + 1);
    const std::size_t hi = lower_bound(all, e);
    if (j == r) {
      s.pieces[r] = slice(local, lo, hi);
    } else {
      encode_sparse_acc(slice(local, lo, hi), b, e, acc_type, &s.out[j]);
      peers.send(j, kTagSplit, s.out[j].data(), s.out[j].size());
    }
    lo = hi;
  }
  const std::size_t b = chunk_begin(dim, n, r), e = chunk_begin(dim, n, r + 1);
  for (std::uint32_t j = 0; j < n; ++j)
    if (j != r) peers.recv_any(j, kTagSplit, &s.in[j], max_encoded_bytes(e - b, 4));
  if (Status st = co_await peers.wait(); !st.ok()) co_return st;
  for (std::uint32_t j = 0; j < n; ++j) {
    if (j == r) continue;
    SparseMessage m;
    bool differs = false;
    if (std::string p = decode(s.in[j].data(), s.in[j].size(), b, e, acc_type, &m, &differs); !p.empty())
      co_return bad_message(peers, j, "(split)", p, differs);
    s.pieces[j] = SparseSpan{m.idx, m.values, m.count};
  }
  co_return Status();
}

Task gather(p2p::Peers& peers, std::size_t dim, DataType dtype, const SparseOutput& out, SparseScratch& s) {
  const std::uint32_t n = peers.size(), r = peers.rank();
  const std::size_t esize = dtype_size(dtype);
  s.in.resize(n);
  for (std::uint32_t j = 0; j < n; ++j) {
    if (j == r) continue;
    peers.send(j, kTagGather, s.mine.data(), s.mine.size());
    const std::size_t len = chunk_begin(dim, n, j + 1) - chunk_begin(dim, n, j);
    peers.recv_any(j, kTagGather, &s.in[j], max_encoded_bytes(len, esize));
  }
  if (Status st = co_await peers.wait(); !st.ok()) co_return st;
  s.messages.resize(n);
  bool dense = false;
  std::size_t total = 0;
  for (std::uint32_t j = 0; j < n; ++j) {
    const std::vector<std::byte>& bytes = j == r ? s.mine : s.in[j];
    bool differs = false;
    const std::string p = decode(bytes.data(), bytes.size(), chunk_begin(dim, n, j), chunk_begin(dim, n, j + 1), dtype,
                                 &s.messages[j], &differs);
    if (!p.empty()) co_return bad_message(peers, j, "(allgather)", p, differs);
    dense = dense || s.messages[j].dense;
    total += s.messages[j].count;
  }
  if (out.result == nullptr) {
    // Dense output (null only when dim is 0: an empty allreduce still runs, to catch a peer
    // whose count differs).
    if (out.dense != nullptr)
      for (const SparseMessage& m : s.messages) write_dense(m, dtype, out.dense);
    co_return Status();
  }
  SparseResult& res = *out.result;
  res.dense = dense;
  if (dense) {
    // One range passed the break-even: the whole result is handed over dense.
    res.indices.clear();
    res.values.resize(dim * esize);
    for (const SparseMessage& m : s.messages) write_dense(m, dtype, res.values.data());
    co_return Status();
  }
  res.indices.resize(total);
  res.values.resize(total * esize);
  std::size_t at = 0;
  for (const SparseMessage& m : s.messages) {
    for (std::uint64_t k = 0; k < m.count; ++k) res.indices[at + k] = m.idx[k];
    if (m.count) std::memcpy(res.values.data() + at * esize, m.values, m.count * esize);
    at += m.count;
  }
  co_return Status();
}

}  // namespace sparcoll::algo::split

namespace sparcoll::algo {

void store_sparse_result(SparseSpan acc, std::size_t dim, DataType dtype, ReduceOp op, std::uint32_t nranks,
                         const SparseOutput& out, Scratch& scratch) {
  const std::size_t esize = dtype_size(dtype);
  if (out.result != nullptr) {
    SparseResult& res = *out.result;
    res.dense = false;
    res.indices.resize(acc.n);
    for (std::size_t k = 0; k < acc.n; ++k) res.indices[k] = acc.idx[k];
    res.values.resize(acc.n * esize);
    block::acc_store(dtype, op, acc.val, acc.n, nranks, res.values.data());
    return;
  }
  // Narrow the values once, contiguously (SIMD), then scatter them into the zeroed tensor.
  if (scratch.tmp.size() < acc.n * esize) scratch.tmp.resize(acc.n * esize);
  block::acc_store(dtype, op, acc.val, acc.n, nranks, scratch.tmp.data());
  SparseMessage m;
  m.begin = 0;
  m.end = dim;
  m.count = acc.n;
  m.idx = acc.idx;
  m.values = scratch.tmp.data();
  write_dense(m, dtype, out.dense);
}

}  // namespace sparcoll::algo
