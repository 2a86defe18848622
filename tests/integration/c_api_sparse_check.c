/* sparcoll-c-sparse-check: allreduce_sparse through the C API, from C (sparse_test.cpp runs it
   under sparcoll-run). Each rank gives index `rank` with 1.0 and index 6 with 2.0 over dim 8,
   for every algorithm; then an unsorted input on every rank must fail with a message naming
   the position. Prints "c sparse: ok" on success. */
#include <stdio.h>
#include <string.h>

#include "sparcoll/sparcoll.h"

static int fail(const char* what, sparcoll_status_t s) {
  fprintf(stderr, "c sparse: %s: %s: %s\n", what, sparcoll_strerror(s), sparcoll_last_error());
  return 1;
}

int main(void) {
  sparcoll_comm_t comm;
  sparcoll_status_t s = sparcoll_comm_init_from_env(&comm);
  if (s != SPARCOLL_SUCCESS) return fail("init", s);
  int rank = 0, size = 0;
  sparcoll_comm_rank(comm, &rank);
  sparcoll_comm_size(comm, &size);
  if (size > 6) return fail("this check needs at most 6 ranks", SPARCOLL_ERR_INVALID_ARGUMENT);
  sparcoll_sparse_result_t result;
  if ((s = sparcoll_sparse_result_create(&result)) != SPARCOLL_SUCCESS) return fail("create", s);
  const sparcoll_sparse_algorithm_t algos[] = {SPARCOLL_SPARSE_FROM_OPTIONS, SPARCOLL_SPARSE_SSAR_RECURSIVE_DOUBLING,
                                               SPARCOLL_SPARSE_SSAR_SPLIT_ALLGATHER,
                                               SPARCOLL_SPARSE_DSAR_SPLIT_ALLGATHER};
  for (size_t a = 0; a < sizeof algos / sizeof algos[0]; ++a) {
    const int64_t idx[2] = {rank, 6};
    const float val[2] = {1.0f, 2.0f};
    s = sparcoll_allreduce_sparse(comm, idx, val, 2, 8, SPARCOLL_FLOAT32, SPARCOLL_SUM, algos[a], result);
    if (s != SPARCOLL_SUCCESS) return fail("allreduce_sparse", s);
    int dense = 0;
    size_t nnz = 0;
    const int64_t* ri = NULL;
    const void* rv = NULL;
    if ((s = sparcoll_sparse_result_get(result, &dense, &nnz, &ri, &rv)) != SPARCOLL_SUCCESS) return fail("get", s);
    float got[8] = {0};
    if (dense) {
      if (nnz != 8) return fail("dense result without 8 values", SPARCOLL_ERR_INTERNAL);
      memcpy(got, rv, sizeof got);
    } else {
      for (size_t k = 0; k < nnz; ++k) got[ri[k]] = ((const float*)rv)[k];
      if (nnz != (size_t)size + 1) return fail("sparse result is not the union of the indices", SPARCOLL_ERR_INTERNAL);
    }
    for (int i = 0; i < 8; ++i) {
      const float want = (i < size ? 1.0f : 0.0f) + (i == 6 ? 2.0f * (float)size : 0.0f);
      if (got[i] != want) {
        fprintf(stderr, "c sparse: algorithm %d: element %d is %g, expected %g\n", (int)algos[a], i, got[i], want);
        return 1;
      }
    }
  }
  /* Unsorted indices on every rank: each fails with the position named. */
  const int64_t bad[2] = {5, 2};
  const float val[2] = {1.0f, 1.0f};
  s = sparcoll_allreduce_sparse(comm, bad, val, 2, 8, SPARCOLL_FLOAT32, SPARCOLL_SUM,
                                SPARCOLL_SPARSE_DSAR_SPLIT_ALLGATHER, result);
  if (s != SPARCOLL_ERR_INVALID_ARGUMENT || strstr(sparcoll_last_error(), "indices[1] = 2") == NULL)
    return fail("unsorted indices were not reported", s);
  sparcoll_sparse_result_destroy(result);
  sparcoll_comm_destroy(comm);
  if (rank == 0) printf("c sparse: ok\n");
  return 0;
}
