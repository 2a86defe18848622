// SparCML's static sparse allreduce (SSAR; Renggli et al., SC19): the result stays sparse.
//
// ssar_recursive_doubling: log2(p) rounds; in round d every rank swaps its whole merged vector
// with partner rank^d and merges the two. Few messages (latency-bound, small vectors), but each
// round carries the union of the supports seen so far. A rank count that is not a power of two
// is folded first as in butterfly.cpp: each even rank below 2*rem hands its vector to the next
// odd rank and gets the result back at the end.
//
// Bitwise identity: both partners of a round hold the same two operand vectors (bit copies of
// each other's accumulators) and merge them in the same order, the lower-rank group's vector
// on the left. So the result is one fixed tree of additions, ((v0+v1)+(v2+v3))+..., evaluated
// identically on every rank; it is rounded once, on identical bytes.
//
// ssar_split_allgather: the owner of each index range merges every rank's piece of it in rank
// order, ((v0+v1)+v2)+..., the same order as a plain reference reduction; see sparse_split.hpp.
#include <bit>
#include <utility>

#include "algo/sparse_split.hpp"

namespace sparcoll::algo {

namespace {
constexpr std::uint32_t kTagFold = 0, kTagRound = 1, kTagUnfold = 64;
}  // namespace

Task ssar_recursive_doubling(p2p::Peers& peers, SparseVector& local, std::size_t dim, DataType dtype,
                             ReduceOp op, const SparseOutput& out, Scratch& scratch) {
  const std::uint32_t n = peers.size(), r = peers.rank();
  const DataType acc_type = p2p::acc_type_of(dtype);
  SparseScratch& s = scratch.sparse;
  s.in.resize(1);
  std::vector<std::byte>& received = s.in[0];
  const std::size_t max_bytes = max_encoded_bytes(dim, 4);
  SparseVector* cur = &local;
  SparseVector* spare = &s.a;

  // Decodes what `from` sent in `step` into a view of its accumulators.
  auto receive = [&](std::uint32_t from, const char* step, SparseSpan* v) -> Status {
    SparseMessage m;
    bool differs = false;
    if (std::string p = decode(received.data(), received.size(), 0, dim, acc_type, &m, &differs); !p.empty())
      return Status(differs ? ErrorCode::mismatch : ErrorCode::protocol_error,
                    peers.what() + " " + step + ": rank " + std::to_string(from) + " sent " + p);
    *v = SparseSpan{m.idx, m.values, m.count};
    return Status();
  };

  const std::uint32_t p = std::bit_floor(n), rem = n - p;
  if (r < 2 * rem && r % 2 == 0) {
    // Folded out: hand the vector to r + 1, take the finished accumulators back.
    encode_sparse_acc(span_of(*cur), 0, dim, acc_type, &s.mine);
    peers.send(r + 1, kTagFold, s.mine.data(), s.mine.size());
    peers.recv_any(r + 1, kTagUnfold, &received, max_bytes);
    if (Status st = co_await peers.wait(); !st.ok()) co_return st;
    SparseSpan result;
    if (Status st = receive(r + 1, "(unfold)", &result); !st.ok()) co_return st;
    store_sparse_result(result, dim, dtype, op, n, out, scratch);
    co_return Status();
  }
  if (r < 2 * rem) {
    peers.recv_any(r - 1, kTagFold, &received, max_bytes);
    if (Status st = co_await peers.wait(); !st.ok()) co_return st;
    SparseSpan theirs;
    if (Status st = receive(r - 1, "(fold)", &theirs); !st.ok()) co_return st;
    merge(theirs, span_of(*cur), acc_type, op, spare);  // the lower rank on the left
    std::swap(cur, spare);
  }
  const std::uint32_t me = r < 2 * rem ? r / 2 : r - rem;  // rank among the p doubling ranks
  auto real = [rem](std::uint32_t v) { return v < rem ? 2 * v + 1 : v + rem; };
  std::uint32_t round = 0;
  for (std::uint32_t d = 1; d < p; d <<= 1, ++round) {
    const std::uint32_t partner = real(me ^ d);
    encode_sparse_acc(span_of(*cur), 0, dim, acc_type, &s.mine);
    peers.send(partner, kTagRound + round, s.mine.data(), s.mine.size());
    peers.recv_any(partner, kTagRound + round, &received, max_bytes);
    if (Status st = co_await peers.wait(); !st.ok()) co_return st;
    SparseSpan theirs;
    if (Status st = receive(partner, "(round)", &theirs); !st.ok()) co_return st;
    if ((me & d) == 0)
      merge(span_of(*cur), theirs, acc_type, op, spare);
    else
      merge(theirs, span_of(*cur), acc_type, op, spare);
    std::swap(cur, spare);
  }
  if (r < 2 * rem) {
    encode_sparse_acc(span_of(*cur), 0, dim, acc_type, &s.mine);
    peers.send(r - 1, kTagUnfold, s.mine.data(), s.mine.size());
    if (Status st = co_await peers.wait(); !st.ok()) co_return st;
  }
  store_sparse_result(span_of(*cur), dim, dtype, op, n, out, scratch);
  co_return Status();
}

Task ssar_split_allgather(p2p::Peers& peers, SparseVector& local, std::size_t dim, DataType dtype, ReduceOp op,
                          const SparseOutput& out, Scratch& scratch) {
  const std::uint32_t n = peers.size(), r = peers.rank();
  const DataType acc_type = p2p::acc_type_of(dtype);
  SparseScratch& s = scratch.sparse;
  if (Status st = co_await split::exchange(peers, local, dim, acc_type, s); !st.ok()) co_return st;
  // Merge the pieces of this rank's range in rank order.
  SparseSpan acc = s.pieces[0];
  SparseVector* dst = &s.a;
  SparseVector* other = &s.b;
  for (std::uint32_t k = 1; k < n; ++k) {
    merge(acc, s.pieces[k], acc_type, op, dst);
    acc = span_of(*dst);
    std::swap(dst, other);
  }
  encode_sparse_final(acc, chunk_begin(dim, n, r), chunk_begin(dim, n, r + 1), dtype, op, n, &s.mine);
  co_return co_await split::gather(peers, dim, dtype, out, s);
}

}  // namespace sparcoll::algo
