/* sparcoll C API: usable from C, C++ and FFI. No exception crosses it: every call returns a
 * sparcoll_status_t (0 = success); sparcoll_last_error() gives the message of the calling
 * thread's last failure. */
#ifndef SPARCOLL_SPARCOLL_H
#define SPARCOLL_SPARCOLL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sparcoll_comm* sparcoll_comm_t;

typedef enum {
  SPARCOLL_SUCCESS = 0,
  SPARCOLL_ERR_INVALID_ARGUMENT = 1,
  SPARCOLL_ERR_MISMATCH = 2,
  SPARCOLL_ERR_PEER_FAILURE = 3,
  SPARCOLL_ERR_TIMEOUT = 4,
  SPARCOLL_ERR_PROTOCOL = 5,
  SPARCOLL_ERR_NO_RESOURCE = 6,
  SPARCOLL_ERR_SYSTEM = 7,
  SPARCOLL_ERR_UNSUPPORTED = 8,
  SPARCOLL_ERR_INTERNAL = 9,
  SPARCOLL_ERR_AUTH = 10,
  SPARCOLL_ERR_BROKEN = 11
} sparcoll_status_t;

typedef enum {
  SPARCOLL_FLOAT32 = 0,
  SPARCOLL_FLOAT16 = 1,
  SPARCOLL_BFLOAT16 = 2,
  SPARCOLL_INT32 = 3
} sparcoll_dtype_t;

typedef enum { SPARCOLL_SUM = 0, SPARCOLL_AVG = 1, SPARCOLL_MIN = 2, SPARCOLL_MAX = 3 } sparcoll_op_t;

/* Creates a communicator from SPARCOLL_* (or torchrun / Open MPI / Slurm) variables. */
sparcoll_status_t sparcoll_comm_init_from_env(sparcoll_comm_t* comm);
sparcoll_status_t sparcoll_comm_rank(sparcoll_comm_t comm, int* rank);
sparcoll_status_t sparcoll_comm_size(sparcoll_comm_t comm, int* size);
/* recvbuf = reduce(sendbuf over all ranks); in place when sendbuf == recvbuf. */
sparcoll_status_t sparcoll_allreduce(sparcoll_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                     sparcoll_dtype_t dtype, sparcoll_op_t op);
sparcoll_status_t sparcoll_barrier(sparcoll_comm_t comm);
/* Zero-copy sends from a buffer kept by the application (see Communicator::register_buffer):
   allreduce calls whose send range lies inside a registered buffer read it in place on rdma. */
sparcoll_status_t sparcoll_register_buffer(sparcoll_comm_t comm, const void* buffer, size_t bytes);
sparcoll_status_t sparcoll_deregister_buffer(sparcoll_comm_t comm, const void* buffer);
/* Destroys the communicator; NULL is accepted. */
sparcoll_status_t sparcoll_comm_destroy(sparcoll_comm_t comm);

/* A static string naming the status code. */
const char* sparcoll_strerror(sparcoll_status_t status);
/* The message of this thread's last failed call ("" if none); valid until the next call. */
const char* sparcoll_last_error(void);

/* ---- sparse allreduce (SparCML; docs/algorithms.md, "SparCML: SSAR and DSAR") ------------- */
#include <stdint.h>

/* Values of sparcoll::Algorithm that allreduce_sparse accepts. */
typedef enum {
  SPARCOLL_SPARSE_FROM_OPTIONS = 0, /* SPARCOLL_ALGO if it names a sparse one, else dsar */
  SPARCOLL_SPARSE_AUTO = 1,         /* dsar_split_allgather */
  SPARCOLL_SPARSE_SSAR_RECURSIVE_DOUBLING = 5,
  SPARCOLL_SPARSE_SSAR_SPLIT_ALLGATHER = 6,
  SPARCOLL_SPARSE_DSAR_SPLIT_ALLGATHER = 7
} sparcoll_sparse_algorithm_t;

/* The result of a sparse allreduce; reuse one across calls (its buffers are kept). */
typedef struct sparcoll_sparse_result* sparcoll_sparse_result_t;
sparcoll_status_t sparcoll_sparse_result_create(sparcoll_sparse_result_t* result);
/* NULL is accepted. */
sparcoll_status_t sparcoll_sparse_result_destroy(sparcoll_sparse_result_t result);
/* The last result: *dense = 1 when values holds all dim elements (indices is then NULL), else
   *nnz sorted indices and their values (nnz elements of the call's dtype). The pointers stay
   valid until the next call with this result or its destruction. */
sparcoll_status_t sparcoll_sparse_result_get(sparcoll_sparse_result_t result, int* dense, size_t* nnz,
                                             const int64_t** indices, const void** values);
/* Every rank gives nnz entries (indices[k], values[k]) of a dim-element vector: indices strictly
   increasing in [0, dim), nnz <= dim <= 2^32, values of dtype; an absent index counts as 0.
   The reduction over ranks lands in `result`. Bad input fails on this rank with a message
   naming the position and value, and on every other rank too. Blocking. */
sparcoll_status_t sparcoll_allreduce_sparse(sparcoll_comm_t comm, const int64_t* indices, const void* values,
                                            size_t nnz, size_t dim, sparcoll_dtype_t dtype, sparcoll_op_t op,
                                            sparcoll_sparse_algorithm_t algorithm, sparcoll_sparse_result_t result);
/* ---- end of sparse allreduce ---------------------------------------------------------------- */

#ifdef __cplusplus
}
#endif

#endif /* SPARCOLL_SPARCOLL_H */
