// The C API of allreduce_sparse: a result handle owning a SparseResult, so C callers need not
// know the result's size in advance and steady-state calls reuse its buffers.
#include "api/c_api_comm.hpp"
#include "api/c_api_util.hpp"
#include "api/c_handles.hpp"

struct sparcoll_sparse_result {
  sparcoll::SparseResult result;
};

using sparcoll::capi::guarded;
using sparcoll::capi::record;

namespace {
sparcoll_status_t invalid(const std::string& what) {
  return record(sparcoll::Status(sparcoll::ErrorCode::invalid_argument, what));
}
}  // namespace

extern "C" {

sparcoll_status_t sparcoll_sparse_result_create(sparcoll_sparse_result_t* result) {
  if (result == nullptr) return invalid("sparcoll_sparse_result_create: result is null");
  *result = nullptr;
  return guarded([&] {
    *result = new sparcoll_sparse_result{};
    sparcoll::capi::adopt(sparcoll::capi::HandleKind::sparse_result, *result);
  });
}

sparcoll_status_t sparcoll_sparse_result_destroy(sparcoll_sparse_result_t result) {
  if (result == nullptr) return SPARCOLL_SUCCESS;
  if (!sparcoll::capi::release(sparcoll::capi::HandleKind::sparse_result, result))
    return sparcoll::capi::not_live("sparcoll_sparse_result_destroy", "result", result);
  return guarded([&] { delete result; });
}

sparcoll_status_t sparcoll_sparse_result_get(sparcoll_sparse_result_t result, int* dense, size_t* nnz,
                                             const int64_t** indices, const void** values) {
  if (const sparcoll_status_t bad = sparcoll::capi::check_handle("sparcoll_sparse_result_get", "result",
                                                                  sparcoll::capi::HandleKind::sparse_result, result);
      bad != SPARCOLL_SUCCESS)
    return bad;
  const sparcoll::SparseResult& r = result->result;
  if (dense) *dense = r.dense ? 1 : 0;
  if (nnz) *nnz = r.nnz();
  if (indices) *indices = r.dense ? nullptr : r.indices.data();
  if (values) *values = r.values.data();
  return guarded([] {});
}

sparcoll_status_t sparcoll_allreduce_sparse(sparcoll_comm_t comm, const int64_t* indices, const void* values,
                                            size_t nnz, size_t dim, sparcoll_dtype_t dtype, sparcoll_op_t op,
                                            sparcoll_sparse_algorithm_t algorithm, sparcoll_sparse_result_t result) {
  if (const sparcoll_status_t bad =
          sparcoll::capi::check_handle("sparcoll_allreduce_sparse", "comm", sparcoll::capi::HandleKind::comm, comm);
      bad != SPARCOLL_SUCCESS)
    return bad;
  // A null result is checked by the collective itself, so the other ranks fail too; a
  // destroyed one here (the others cannot see it, and will time out).
  if (result != nullptr)
    if (const sparcoll_status_t bad = sparcoll::capi::check_handle("sparcoll_allreduce_sparse", "result",
                                                                    sparcoll::capi::HandleKind::sparse_result, result);
        bad != SPARCOLL_SUCCESS)
      return bad;
  return guarded([&] {
    comm->comm.allreduce_sparse(reinterpret_cast<const std::int64_t*>(indices), values, nnz, dim,
                                sparcoll::capi::dtype_of(dtype), sparcoll::capi::op_of(op),
                                result ? &result->result : nullptr, sparcoll::capi::algo_of(algorithm));
  });
}

}  // extern "C"
