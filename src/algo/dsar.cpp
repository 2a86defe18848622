// SparCML's dynamic sparse allreduce (DSAR; Renggli et al., SC19): for inputs that are sparse
// but whose sum fills up. The split and the allgather are those of ssar_split_allgather
// (sparse_split.hpp); the owner of a range merges the ranks' pieces of it in rank order, and
// once the merged range passes the break-even density (nnz * (4 + value bytes) >= len * value
// bytes, sparse_vector.hpp) it continues in a dense accumulator array and sends the range dense
// in the allgather: past that point a sparse merge costs more and the sparse message is larger.
//
// The order of operations per element is the rank order of the sparse merge, also after the
// switch (acc = acc op piece), so the result is the same as ssar_split_allgather's up to the
// sign of zeros, and bitwise identical on every rank (one owner computes each element).
#include <cstring>
#include <utility>

#include "algo/sparse_split.hpp"
#include "block/reduce.hpp"

namespace sparcoll::algo {

namespace {

// dense[idx - begin] = val for every item of v (dense zeroed before).
void scatter(SparseSpan v, std::uint64_t begin, std::uint32_t* dense) {
  const auto* val = static_cast<const std::uint32_t*>(v.val);
  for (std::size_t k = 0; k < v.n; ++k) dense[v.idx[k] - begin] = val[k];
}

// acc = op(acc, piece) over the whole range, absent entries of the piece being 0.
void reduce_into_dense(SparseSpan piece, std::uint64_t begin, std::size_t len, DataType acc_type, ReduceOp op,
                       SparseScratch& s) {
  std::uint32_t* acc = s.dense_acc.data();
  const auto* val = static_cast<const std::uint32_t*>(piece.val);
  if (op == ReduceOp::sum || op == ReduceOp::avg) {
    // Adding 0 changes nothing: touch only the piece's entries.
    for (std::size_t k = 0; k < piece.n; ++k) {
      std::uint32_t& a = acc[piece.idx[k] - begin];
      if (acc_type == DataType::i32) {
        a += val[k];
      } else {
        float x, y;
        std::memcpy(&x, &a, 4);
        std::memcpy(&y, val + k, 4);
        x += y;
        std::memcpy(&a, &x, 4);
      }
    }
    return;
  }
  // min/max: every element takes part (an absent one as 0), so densify the piece and use the
  // block kernel over the range.
  s.dense_tmp.assign(len, 0);
  scatter(piece, begin, s.dense_tmp.data());
  block::acc_reduce(acc_type, op, s.dense_tmp.data(), acc, len);
}

}  // namespace

Task dsar_split_allgather(p2p::Peers& peers, SparseVector& local, std::size_t dim, DataType dtype, ReduceOp op,
                          const SparseOutput& out, Scratch& scratch) {
  const std::uint32_t n = peers.size(), r = peers.rank();
  const DataType acc_type = p2p::acc_type_of(dtype);
  const std::size_t esize = dtype_size(dtype);
  SparseScratch& s = scratch.sparse;
  if (Status st = co_await split::exchange(peers, local, dim, acc_type, s); !st.ok()) co_return st;
  const std::uint64_t begin = chunk_begin(dim, n, r), end = chunk_begin(dim, n, r + 1);
  const std::size_t len = end - begin;
  // An empty range is never "dense": it would make every small result dense for nothing.
  auto past_break_even = [&](std::size_t nnz) { return len > 0 && dense_is_cheaper(nnz, len, esize); };

  SparseSpan acc = s.pieces[0];
  SparseVector* dst = &s.a;
  SparseVector* other = &s.b;
  bool dense = false;
  auto densify = [&] {
    s.dense_acc.assign(len, 0);  // all-zero bits: +0.0f and int 0
    scatter(acc, begin, s.dense_acc.data());
    dense = true;
  };
  for (std::uint32_t k = 1; k < n; ++k) {
    if (!dense && past_break_even(acc.n)) densify();
    if (dense) {
      reduce_into_dense(s.pieces[k], begin, len, acc_type, op, s);
    } else {
      merge(acc, s.pieces[k], acc_type, op, dst);
      acc = span_of(*dst);
      std::swap(dst, other);
    }
  }
  if (!dense && past_break_even(acc.n)) densify();
  if (dense)
    encode_dense_final(s.dense_acc.data(), begin, end, dtype, op, n, &s.mine);
  else
    encode_sparse_final(acc, begin, end, dtype, op, n, &s.mine);
  co_return co_await split::gather(peers, dim, dtype, out, s);
}

}  // namespace sparcoll::algo
