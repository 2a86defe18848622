// Entry points of the SparCML algorithms on the collective thread: a dense tensor is turned into
// this rank's sparse entries (its non-zero elements) and the result written back dense; the
// sparse API's entries arrive ready (api/communicator_impl.cpp checked and widened them).
#include "algo/p2p_algorithms.hpp"

namespace sparcoll::algo {

namespace {

Task run(p2p::Peers& peers, Algorithm algo, SparseVector& local, std::size_t dim, DataType dtype, ReduceOp op,
         const SparseOutput& out, Scratch& scratch) {
  switch (algo) {
    case Algorithm::ssar_recursive_doubling:
      co_return co_await ssar_recursive_doubling(peers, local, dim, dtype, op, out, scratch);
    case Algorithm::ssar_split_allgather:
      co_return co_await ssar_split_allgather(peers, local, dim, dtype, op, out, scratch);
    case Algorithm::dsar_split_allgather:
      co_return co_await dsar_split_allgather(peers, local, dim, dtype, op, out, scratch);
    default: break;
  }
  co_return Status(ErrorCode::unsupported, peers.what() + ": " + std::string(algorithm_name(algo)) +
                                               " is not a sparse allreduce algorithm");
}

}  // namespace

Task sparse_allreduce_dense(p2p::Peers& peers, Algorithm algo, const void* send, void* recv, std::size_t count,
                            DataType dtype, ReduceOp op, Scratch& scratch) {
  SparseVector& local = scratch.sparse.local;
  dense_to_sparse(send, 0, count, dtype, &local, &scratch.sparse.bits);
  const SparseOutput out{recv, nullptr};  // a named local, not a temporary held across the await
  co_return co_await run(peers, algo, local, count, dtype, op, out, scratch);
}

Task sparse_allreduce(p2p::Peers& peers, Algorithm algo, SparseVector& entries, std::size_t dim, DataType dtype,
                      ReduceOp op, SparseResult* result, Scratch& scratch) {
  result->dim = dim;
  result->dtype = dtype;
  const SparseOutput out{nullptr, result};
  co_return co_await run(peers, algo, entries, dim, dtype, op, out, scratch);
}

}  // namespace sparcoll::algo
