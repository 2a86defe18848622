/* sparcoll C API: usable from C, C++ and FFI. No exception crosses it: every call returns a
 * sparcoll_status_t (0 = success); sparcoll_last_error() gives the message of the calling
 * thread's last failure. */
#ifndef SPARCOLL_SPARCOLL_H
#define SPARCOLL_SPARCOLL_H

#include <stddef.h>
#include <stdint.h>

#include "sparcoll/version.h"

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

/* SPARCOLL_FLOAT64, SPARCOLL_INT64: reduced by the dense algorithms (ring, butterfly,
 * recursive doubling; SPARCOLL_ALGO_AUTO picks among them), moved by every collective. */
typedef enum {
  SPARCOLL_FLOAT32 = 0,
  SPARCOLL_FLOAT16 = 1,
  SPARCOLL_BFLOAT16 = 2,
  SPARCOLL_INT32 = 3,
  SPARCOLL_FLOAT64 = 4,
  SPARCOLL_INT64 = 5
} sparcoll_dtype_t;

/* SPARCOLL_BAND, _BOR, _BXOR: bitwise, on SPARCOLL_INT32 only. */
typedef enum {
  SPARCOLL_SUM = 0,
  SPARCOLL_AVG = 1,
  SPARCOLL_MIN = 2,
  SPARCOLL_MAX = 3,
  SPARCOLL_PROD = 4,
  SPARCOLL_BAND = 5,
  SPARCOLL_BOR = 6,
  SPARCOLL_BXOR = 7
} sparcoll_op_t;

/* Options of a communicator, for sparcoll_comm_init. Opaque, so options can be added without
 * changing the ABI. Keys and values are those of the SPARCOLL_* variables (docs/config.md): the
 * option's name ("block_elems") or its variable ("SPARCOLL_BLOCK_ELEMS"), and the variable's
 * text ("512"). */
typedef struct sparcoll_options sparcoll_options_t;

/* New options holding the defaults only: the environment is not read. */
sparcoll_status_t sparcoll_options_create(sparcoll_options_t** options);
/* New options holding the defaults, then the SPARCOLL_* and launcher variables (as
 * sparcoll_comm_init_from_env reads them); sparcoll_options_set overrides them. */
sparcoll_status_t sparcoll_options_create_from_env(sparcoll_options_t** options);
/* Sets one option. Fails with SPARCOLL_ERR_INVALID_ARGUMENT naming the key for an unknown key or
 * a malformed value; ranges and combinations are checked by sparcoll_comm_init. */
sparcoll_status_t sparcoll_options_set(sparcoll_options_t* options, const char* key, const char* value);
/* Destroys options; NULL is accepted. A communicator keeps its own copy. */
sparcoll_status_t sparcoll_options_destroy(sparcoll_options_t* options);

/* Creates a communicator for a framework that did its own rendezvous: this process is `rank` of
 * `size` workers, and rank 0 hosts the store at `store_address` ("host:port"; NULL keeps the
 * options' store, which a single rank does not need). `options` NULL reads the environment, as
 * sparcoll_comm_init_from_env does; rank, size and store_address override what options hold.
 * Blocks until every rank has joined. */
sparcoll_status_t sparcoll_comm_init(sparcoll_comm_t* comm, int rank, int size, const char* store_address,
                                     const sparcoll_options_t* options);
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

/* --- Algorithms, broadcast, allgather, reduce_scatter and non-blocking calls -----------------
 * Every rank must make the same calls in the same order with the same algorithm, counts and
 * root. A bad argument on one rank (null buffer, unknown value) fails that collective on every
 * rank with SPARCOLL_ERR_INVALID_ARGUMENT; counts that differ fail it with SPARCOLL_ERR_MISMATCH
 * on the ranks that can see it. The communicator stays usable after both. */

/* How an allreduce runs (docs/algorithms.md); values are sparcoll::Algorithm's: append only. */
typedef enum {
  SPARCOLL_ALGO_DEFAULT = 0,      /* the communicator's SPARCOLL_ALGO */
  SPARCOLL_ALGO_AUTO = 1,         /* block recursive doubling when small, else ring or hybrid (the default) */
  SPARCOLL_ALGO_BLOCK_SPARSE = 2, /* streaming block-sparse aggregation */
  SPARCOLL_ALGO_RING = 3,         /* dense ring: reduce-scatter + allgather */
  SPARCOLL_ALGO_BUTTERFLY = 4,    /* dense recursive halving/doubling */
  SPARCOLL_ALGO_SSAR_RECURSIVE_DOUBLING = 5,
  SPARCOLL_ALGO_SSAR_SPLIT_ALLGATHER = 6,
  SPARCOLL_ALGO_DSAR_SPLIT_ALLGATHER = 7,
  SPARCOLL_ALGO_RECURSIVE_DOUBLING = 8, /* dense, latency-optimal (small tensors) */
  SPARCOLL_ALGO_DIRECT = 9,             /* dense, reads peers' memory in place (shm transport) */
  SPARCOLL_ALGO_HYBRID = 10,            /* per stripe: block-sparse where sparse, dense where dense */
  SPARCOLL_ALGO_BLOCK_RECURSIVE_DOUBLING = 11 /* recursive doubling of the non-zero blocks */
} sparcoll_algo_t;

/* A collective in flight. Its buffers must stay valid until sparcoll_wait or sparcoll_test has
 * reported it finished (or sparcoll_request_free has returned). */
typedef struct sparcoll_request* sparcoll_request_t;

/* sparcoll_allreduce with the algorithm named per call. */
sparcoll_status_t sparcoll_allreduce_algo(sparcoll_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                          sparcoll_dtype_t dtype, sparcoll_op_t op, sparcoll_algo_t algo);
/* buffer (count elements) on every rank = buffer on rank `root`. */
sparcoll_status_t sparcoll_broadcast(sparcoll_comm_t comm, void* buffer, size_t count, sparcoll_dtype_t dtype,
                                     int root);
/* recvbuf (size * count elements) = every rank's sendbuf (count elements), in rank order; in
 * place when sendbuf == recvbuf + rank * count elements. */
sparcoll_status_t sparcoll_allgather(sparcoll_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                     sparcoll_dtype_t dtype);
/* recvbuf (count elements) = reduction over ranks of elements [rank * count, (rank + 1) * count)
 * of sendbuf (size * count elements). */
sparcoll_status_t sparcoll_reduce_scatter(sparcoll_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                          sparcoll_dtype_t dtype, sparcoll_op_t op);
/* Rooted collectives: the root's buffer (reduce's and gather's recvbuf, scatter's sendbuf) is
 * used on the root only and may be NULL elsewhere. A root that differs across ranks fails the
 * call on every rank with SPARCOLL_ERR_MISMATCH.
 * recvbuf (count elements, on root) = reduction of every rank's sendbuf; in place when
 * sendbuf == recvbuf on the root. */
sparcoll_status_t sparcoll_reduce(sparcoll_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                  sparcoll_dtype_t dtype, sparcoll_op_t op, int root);
/* recvbuf (size * count elements, on root) = every rank's sendbuf (count elements), in rank
 * order; in place when sendbuf == recvbuf + root * count elements on the root. */
sparcoll_status_t sparcoll_gather(sparcoll_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                  sparcoll_dtype_t dtype, int root);
/* recvbuf (count elements) on rank p = elements [p * count, (p + 1) * count) of sendbuf (size *
 * count elements, on root); in place when recvbuf == sendbuf + root * count elements on the root. */
sparcoll_status_t sparcoll_scatter(sparcoll_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                   sparcoll_dtype_t dtype, int root);

/* Rank p receives bytes [p * bytes_per_rank, (p + 1) * bytes_per_rank) of every rank's sendbuf,
 * in rank order in its recvbuf (size * bytes_per_rank bytes each); the buffers must not overlap.
 * The _v form: send_bytes[p] bytes at sendbuf + send_offsets[p] go to rank p, recv_bytes[p]
 * bytes from rank p land at recvbuf + recv_offsets[p] (arrays of size entries, copied by the
 * call); recv_bytes[p] must be rank p's send_bytes[this rank] (else SPARCOLL_ERR_MISMATCH). */
sparcoll_status_t sparcoll_all_to_all(sparcoll_comm_t comm, const void* sendbuf, void* recvbuf, size_t bytes_per_rank);
sparcoll_status_t sparcoll_all_to_all_v(sparcoll_comm_t comm, const void* sendbuf, const size_t* send_bytes,
                                        const size_t* send_offsets, void* recvbuf, const size_t* recv_bytes,
                                        const size_t* recv_offsets);

/* Several buffers of one dtype in one collective (PyTorch's coalesced calls): buffer i holds
 * counts[i] elements (n buffers). The send buffers are packed when the call returns and may be
 * reused; the results reach the recv buffers when the call (or sparcoll_wait/test) reports it
 * finished. Counts that differ across ranks, even with the same total, fail the call on every
 * rank with SPARCOLL_ERR_MISMATCH; a NULL array or a NULL buffer with a non-zero count on one
 * rank fails it on every rank with SPARCOLL_ERR_INVALID_ARGUMENT.
 * recvbufs[i] = reduction of every rank's sendbufs[i]; in place when they are equal. */
sparcoll_status_t sparcoll_allreduce_coalesced(sparcoll_comm_t comm, const void* const* sendbufs, void* const* recvbufs,
                                               const size_t* counts, size_t n, sparcoll_dtype_t dtype,
                                               sparcoll_op_t op);
/* recvbufs[i] (size * counts[i] elements) = every rank's sendbufs[i], in rank order. */
sparcoll_status_t sparcoll_allgather_coalesced(sparcoll_comm_t comm, const void* const* sendbufs, void* const* recvbufs,
                                               const size_t* counts, size_t n, sparcoll_dtype_t dtype);

/* Point to point, outside collectives (only the two ranks call them): bytes to or from rank
 * `peer` with a tag >= 0. A recv takes the first message from `peer` (or from any rank, with
 * SPARCOLL_ANY_SOURCE) with its tag, each sender's in the order it sent them; its size must be
 * the recv's (else SPARCOLL_ERR_MISMATCH for that recv alone). *source (when not NULL) is set
 * to the sender. Both fail with SPARCOLL_ERR_TIMEOUT after the communicator's deadline. Bad
 * arguments fail the call at once with SPARCOLL_ERR_INVALID_ARGUMENT, on this rank only. */
#define SPARCOLL_ANY_SOURCE (-1)
sparcoll_status_t sparcoll_send(sparcoll_comm_t comm, const void* buf, size_t bytes, int peer, int tag);
sparcoll_status_t sparcoll_recv(sparcoll_comm_t comm, void* buf, size_t bytes, int peer, int tag, int* source);

/* Non-blocking variants: start the collective and set *request (NULL on failure). */
sparcoll_status_t sparcoll_iallreduce(sparcoll_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                      sparcoll_dtype_t dtype, sparcoll_op_t op, sparcoll_algo_t algo,
                                      sparcoll_request_t* request);
sparcoll_status_t sparcoll_ibroadcast(sparcoll_comm_t comm, void* buffer, size_t count, sparcoll_dtype_t dtype,
                                      int root, sparcoll_request_t* request);
sparcoll_status_t sparcoll_iallgather(sparcoll_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                      sparcoll_dtype_t dtype, sparcoll_request_t* request);
sparcoll_status_t sparcoll_ireduce_scatter(sparcoll_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                           sparcoll_dtype_t dtype, sparcoll_op_t op, sparcoll_request_t* request);
sparcoll_status_t sparcoll_ireduce(sparcoll_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                   sparcoll_dtype_t dtype, sparcoll_op_t op, int root, sparcoll_request_t* request);
sparcoll_status_t sparcoll_igather(sparcoll_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                   sparcoll_dtype_t dtype, int root, sparcoll_request_t* request);
sparcoll_status_t sparcoll_iscatter(sparcoll_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                    sparcoll_dtype_t dtype, int root, sparcoll_request_t* request);
sparcoll_status_t sparcoll_iall_to_all(sparcoll_comm_t comm, const void* sendbuf, void* recvbuf,
                                       size_t bytes_per_rank, sparcoll_request_t* request);
sparcoll_status_t sparcoll_iall_to_all_v(sparcoll_comm_t comm, const void* sendbuf, const size_t* send_bytes,
                                         const size_t* send_offsets, void* recvbuf, const size_t* recv_bytes,
                                         const size_t* recv_offsets, sparcoll_request_t* request);
sparcoll_status_t sparcoll_iallreduce_coalesced(sparcoll_comm_t comm, const void* const* sendbufs,
                                                void* const* recvbufs, const size_t* counts, size_t n,
                                                sparcoll_dtype_t dtype, sparcoll_op_t op, sparcoll_request_t* request);
sparcoll_status_t sparcoll_iallgather_coalesced(sparcoll_comm_t comm, const void* const* sendbufs,
                                                void* const* recvbufs, const size_t* counts, size_t n,
                                                sparcoll_dtype_t dtype, sparcoll_request_t* request);
/* *source is written when the recv completes: it must stay valid until then. */
sparcoll_status_t sparcoll_isend(sparcoll_comm_t comm, const void* buf, size_t bytes, int peer, int tag,
                                 sparcoll_request_t* request);
sparcoll_status_t sparcoll_irecv(sparcoll_comm_t comm, void* buf, size_t bytes, int peer, int tag, int* source,
                                 sparcoll_request_t* request);
/* Waits until the collective finished, frees the request and sets *request = NULL (as MPI_Wait
 * does); returns the collective's status. */
sparcoll_status_t sparcoll_wait(sparcoll_request_t* request);
/* Never blocks. *done = 0 while it runs (SPARCOLL_SUCCESS); once finished, *done = 1, the request
 * is freed, *request = NULL, and the collective's status is returned. */
sparcoll_status_t sparcoll_test(sparcoll_request_t* request, int* done);
/* Frees a request without looking at its outcome, first waiting for it if it still runs; NULL
 * is accepted. */
sparcoll_status_t sparcoll_request_free(sparcoll_request_t request);

/* A static string naming the status code. */
const char* sparcoll_strerror(sparcoll_status_t status);
/* The message of this thread's last failed call ("" if none); valid until the next call. */
const char* sparcoll_last_error(void);

/* The version of the library running ("0.1.0"), and its number major * 10000 + minor * 100 +
 * patch; SPARCOLL_VERSION_* (version.h) are the headers' version, fixed at compile time. */
const char* sparcoll_version(void);
int sparcoll_version_number(void);

/* ---- sparse allreduce (SparCML; docs/algorithms.md, "SparCML: SSAR and DSAR") ------------- */

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
