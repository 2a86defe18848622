// Entry points of the SparCML algorithms on the collective thread: a dense tensor is turned into
// this rank's sparse entries (its non-zero elements) and the result written back dense; the
// sparse API's entries arrive ready (api/communicator_impl.cpp checked and widened them).
#include "algo/p2p_algorithms.hpp"

namespace sparcoll::algo {

namespace {

Status run(p2p::Peers& peers, Algorithm algo, SparseVector& local, std::size_t dim, DataType dtype, ReduceOp op,
           const SparseOutput& out, Scratch& scratch) {
  switch (algo) {
    case Algorithm::ssar_recursive_doubling:
      return ssar_recursive_doubling(peers, local, dim, dtype, op, out, scratch);
    case Algorithm::ssar_split_allgather: return ssar_split_allgather(peers, local, dim, dtype, op, out, scratch);
    case Algorithm::dsar_split_allgather: return dsar_split_allgather(peers, local, dim, dtype, op, out, scratch);
    default: break;
  }
  return Status(ErrorCode::unsupported, peers.what() + ": " + std::string(algorithm_name(algo)) +
                                            " is not a sparse allreduce algorithm");
}

}  // namespace

Status sparse_allreduce_dense(p2p::Peers& peers, Algorithm algo, const void* send, void* recv, std::size_t count,
                              DataType dtype, ReduceOp op, Scratch& scratch) {
  SparseVector& local = scratch.sparse.local;
  dense_to_sparse(send, 0, count, dtype, &local, &scratch.sparse.bits);
  return run(peers, algo, local, count, dtype, op, SparseOutput{recv, nullptr}, scratch);
}

Status sparse_allreduce(p2p::Peers& peers, Algorithm algo, SparseVector& entries, std::size_t dim, DataType dtype,
                        ReduceOp op, SparseResult* result, Scratch& scratch) {
  result->dim = dim;
  result->dtype = dtype;
  return run(peers, algo, entries, dim, dtype, op, SparseOutput{nullptr, result}, scratch);
}

}  // namespace sparcoll::algo
