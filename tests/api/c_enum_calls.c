/* See c_enum_calls.h: each call casts its int arguments to the API's enums, in C. */
#include "c_enum_calls.h"

sparcoll_status_t c_enum_allreduce(sparcoll_comm_t comm, float* buf, size_t n, int dtype, int op) {
  return sparcoll_allreduce(comm, buf, buf, n, (sparcoll_dtype_t)dtype, (sparcoll_op_t)op);
}

sparcoll_status_t c_enum_allreduce_algo(sparcoll_comm_t comm, float* buf, size_t n, int dtype, int op, int algo) {
  return sparcoll_allreduce_algo(comm, buf, buf, n, (sparcoll_dtype_t)dtype, (sparcoll_op_t)op, (sparcoll_algo_t)algo);
}

/* Starts the non-blocking allreduce and waits for it: the status of whichever step failed. */
sparcoll_status_t c_enum_iallreduce(sparcoll_comm_t comm, float* buf, size_t n, int dtype, int op, int algo) {
  sparcoll_request_t request = NULL;
  sparcoll_status_t s = sparcoll_iallreduce(comm, buf, buf, n, (sparcoll_dtype_t)dtype, (sparcoll_op_t)op,
                                            (sparcoll_algo_t)algo, &request);
  return s != SPARCOLL_SUCCESS ? s : sparcoll_wait(&request);
}

sparcoll_status_t c_enum_broadcast(sparcoll_comm_t comm, float* buf, size_t n, int dtype) {
  return sparcoll_broadcast(comm, buf, n, (sparcoll_dtype_t)dtype, 0);
}

sparcoll_status_t c_enum_allgather(sparcoll_comm_t comm, float* buf, size_t n, int dtype) {
  return sparcoll_allgather(comm, buf, buf, n, (sparcoll_dtype_t)dtype);
}

sparcoll_status_t c_enum_reduce_scatter(sparcoll_comm_t comm, float* buf, size_t n, int dtype, int op) {
  return sparcoll_reduce_scatter(comm, buf, buf, n, (sparcoll_dtype_t)dtype, (sparcoll_op_t)op);
}

/* Two entries (indices 1 and 3 of 8) into `result`. */
sparcoll_status_t c_enum_allreduce_sparse(sparcoll_comm_t comm, int dtype, int op, int algorithm,
                                          sparcoll_sparse_result_t result) {
  const int64_t indices[2] = {1, 3};
  const float values[2] = {1.0f, 2.0f};
  return sparcoll_allreduce_sparse(comm, indices, values, 2, 8, (sparcoll_dtype_t)dtype, (sparcoll_op_t)op,
                                   (sparcoll_sparse_algorithm_t)algorithm, result);
}

const char* c_enum_strerror(int status) { return sparcoll_strerror((sparcoll_status_t)status); }
