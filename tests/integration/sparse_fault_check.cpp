// sparcoll-sparse-fault SCENARIO ALGO: run under sparcoll-run; rank 1 (the "culprit") gives
// allreduce_sparse the bad input SCENARIO names; it must fail with invalid_argument and a message
// naming the position and value, every other rank with the same code naming rank 1 (no hang), and
// the communicator must work afterwards. Each rank prints "fault: rank R: <error>" and exits 0
// when its outcome is the expected one.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "sparcoll/sparcoll.hpp"

namespace {

using sparcoll::DataType;
using sparcoll::ErrorCode;
using sparcoll::ReduceOp;

// After the failure: a correct sparse allreduce (each rank gives index r and 5) still works.
int check_still_works(sparcoll::Communicator& comm, sparcoll::Algorithm algo) {
  // Index rank with 1 and index 5 with 2, sorted (rank 5 gives index 5 with 1 only).
  const bool after = comm.rank() > 5;
  const std::int64_t idx[2] = {after ? 5 : comm.rank(), after ? comm.rank() : 5};
  const float val[2] = {after ? 2.0f : 1.0f, after ? 1.0f : 2.0f};
  sparcoll::SparseResult r;
  comm.allreduce_sparse(idx, val, comm.rank() == 5 ? 1 : 2, 8, DataType::f32, ReduceOp::sum, &r, algo);
  std::vector<float> dense(8, 0.0f);
  if (r.dense) std::memcpy(dense.data(), r.values.data(), 32);
  else
    for (std::size_t k = 0; k < r.indices.size(); ++k) dense[static_cast<std::size_t>(r.indices[k])] = r.values_as<float>()[k];
  for (int i = 0; i < 8; ++i) {
    const float want = (i < comm.size() ? 1.0f : 0.0f) + (i == 5 ? 2.0f * comm.size() - (comm.size() > 5 ? 2.0f : 0.0f) : 0.0f);
    if (dense[static_cast<std::size_t>(i)] != want) {
      std::printf("fault: rank %d: wrong result after the failure at %d: %g, expected %g\n", comm.rank(), i,
                  dense[static_cast<std::size_t>(i)], want);
      return 1;
    }
  }
  std::printf("fault: rank %d: communicator still works\n", comm.rank());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: sparcoll-sparse-fault SCENARIO ALGO\n");
    return 2;
  }
  const std::string scenario = argv[1];
  const auto algo = sparcoll::parse_algorithm(argv[2]);
  if (!algo) {
    std::fprintf(stderr, "sparcoll-sparse-fault: unknown algorithm %s\n", argv[2]);
    return 2;
  }
  try {
    sparcoll::Communicator comm = sparcoll::Communicator::from_env();
    const bool culprit = comm.rank() == 1;
    std::vector<std::int64_t> idx = {0, 3, 5, 9};
    std::vector<float> val = {1, 2, 3, 4};
    std::size_t dim = 10, nnz = idx.size();
    sparcoll::Algorithm a = *algo;
    const char* culprit_mentions = nullptr;
    // The culprit's peers fail with its own code, carried by its abort (as block-sparse aborts do).
    ErrorCode others_code = ErrorCode::invalid_argument, culprit_code = ErrorCode::invalid_argument;
    if (scenario == "unsorted") {
      if (culprit) idx = {0, 5, 3, 9};
      culprit_mentions = "indices[2] = 3 is below indices[1] = 5";
    } else if (scenario == "duplicate") {
      if (culprit) idx = {0, 3, 3, 9};
      culprit_mentions = "indices[2] = 3 repeats indices[1]";
    } else if (scenario == "index_too_large") {
      if (culprit) idx = {0, 3, 5, 10};
      culprit_mentions = "indices[3] = 10 is outside [0, dim = 10)";
    } else if (scenario == "negative_index") {
      if (culprit) idx = {-1, 3, 5, 9};
      culprit_mentions = "indices[0] = -1 is outside";
    } else if (scenario == "nnz_above_dim") {
      if (culprit) nnz = 11;
      culprit_mentions = "nnz 11 exceeds dim 10";
    } else if (scenario == "dense_algorithm") {
      if (culprit) a = sparcoll::Algorithm::ring;
      culprit_mentions = "ring is not a sparse allreduce";
    } else if (scenario == "dim_mismatch") {
      // Valid input, but another dim: a usage mismatch every rank must notice, none may hang.
      if (culprit) dim = 1001;
      else dim = 1000;
      culprit_code = others_code = ErrorCode::mismatch;
    } else {
      std::fprintf(stderr, "sparcoll-sparse-fault: unknown scenario %s\n", scenario.c_str());
      return 2;
    }
    std::vector<float> big_val(12, 1.0f);
    sparcoll::SparseResult result;
    try {
      comm.allreduce_sparse(idx.data(), nnz > val.size() ? big_val.data() : val.data(), nnz, dim, DataType::f32,
                            ReduceOp::sum, &result, a);
    } catch (const sparcoll::Error& e) {
      std::printf("fault: rank %d: %s\n", comm.rank(), e.what());
      const ErrorCode want = culprit ? culprit_code : others_code;
      if (e.code() != want) {
        std::printf("fault: rank %d: expected code '%s'\n", comm.rank(), sparcoll::error_code_name(want));
        return 1;
      }
      const char* mention = culprit ? culprit_mentions : "rank 1";
      if (scenario == "dim_mismatch") mention = "dim differs";
      // In a dim mismatch a rank may learn of it from another rank's abort instead.
      if (mention && std::strstr(e.what(), mention) == nullptr &&
          !(scenario == "dim_mismatch" && std::strstr(e.what(), "failed it") != nullptr)) {
        std::printf("fault: rank %d: expected the message to mention '%s'\n", comm.rank(), mention);
        return 1;
      }
      return check_still_works(comm, *algo);
    }
    std::printf("fault: rank %d: %s did not fail\n", comm.rank(), scenario.c_str());
    return 1;
  } catch (const sparcoll::Error& e) {
    std::printf("fault: rank %d: unexpected error: %s\n", 0, e.what());
    return 1;
  }
}
