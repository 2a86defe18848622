/* sparcoll-c-check: the C API from a C program, run under sparcoll-run. Checks a sum, the
 * error codes and messages of bad calls, and that the communicator survives them.
 * Prints "c-api: ok" on every rank on success. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sparcoll/sparcoll.h"

#define CHECK(cond, ...)                      \
  do {                                        \
    if (!(cond)) {                            \
      fprintf(stderr, "c-api: " __VA_ARGS__); \
      fprintf(stderr, "\n");                  \
      return 1;                               \
    }                                         \
  } while (0)

int main(void) {
  sparcoll_comm_t comm = NULL;
  sparcoll_status_t s = sparcoll_comm_init_from_env(&comm);
  CHECK(s == SPARCOLL_SUCCESS, "init failed: %s", sparcoll_last_error());
  int rank = -1, size = -1;
  CHECK(sparcoll_comm_rank(comm, &rank) == SPARCOLL_SUCCESS && sparcoll_comm_size(comm, &size) == SPARCOLL_SUCCESS,
        "rank/size failed");

  enum { N = 1000 };
  float* data = malloc(N * sizeof(float));
  for (int i = 0; i < N; ++i) data[i] = (i % 7 == 0) ? (float)(rank + 1) : 0.0f;
  s = sparcoll_allreduce(comm, data, data, N, SPARCOLL_FLOAT32, SPARCOLL_SUM);
  CHECK(s == SPARCOLL_SUCCESS, "allreduce failed: %s", sparcoll_last_error());
  const float want = (float)(size * (size + 1) / 2);
  for (int i = 0; i < N; ++i) CHECK(data[i] == (i % 7 == 0 ? want : 0.0f), "wrong sum at %d: %f", i, data[i]);

  /* Bad calls: a code, a message, no crash. */
  s = sparcoll_allreduce(NULL, data, data, N, SPARCOLL_FLOAT32, SPARCOLL_SUM);
  CHECK(s == SPARCOLL_ERR_INVALID_ARGUMENT && strstr(sparcoll_last_error(), "comm is null"), "null comm: %d", s);
  /* Every rank passes the same invalid dtype, so every rank aborts the op the same way. */
  s = sparcoll_allreduce(comm, data, data, N, (sparcoll_dtype_t)99, SPARCOLL_SUM);
  CHECK(s == SPARCOLL_ERR_INVALID_ARGUMENT && strstr(sparcoll_last_error(), "dtype 99"), "bad dtype: %d %s", s,
        sparcoll_last_error());
  CHECK(strcmp(sparcoll_strerror(SPARCOLL_ERR_TIMEOUT), "timeout") == 0, "strerror: %s",
        sparcoll_strerror(SPARCOLL_ERR_TIMEOUT));

  /* Still usable: an int32 max and a barrier. */
  int value = rank * 10;
  s = sparcoll_allreduce(comm, &value, &value, 1, SPARCOLL_INT32, SPARCOLL_MAX);
  CHECK(s == SPARCOLL_SUCCESS && value == (size - 1) * 10, "max after errors: %d (%s)", value, sparcoll_last_error());
  CHECK(sparcoll_barrier(comm) == SPARCOLL_SUCCESS, "barrier: %s", sparcoll_last_error());

  /* A registered send buffer (zero-copy on rdma), and the registration errors. */
  CHECK(sparcoll_register_buffer(comm, data, N * sizeof(float)) == SPARCOLL_SUCCESS, "register: %s",
        sparcoll_last_error());
  for (int i = 0; i < N; ++i) data[i] = (i % 5 == 0) ? 1.0f : 0.0f;
  s = sparcoll_allreduce(comm, data, data, N, SPARCOLL_FLOAT32, SPARCOLL_SUM);
  CHECK(s == SPARCOLL_SUCCESS && data[0] == (float)size && data[1] == 0.0f, "registered allreduce: %s",
        sparcoll_last_error());
  s = sparcoll_register_buffer(comm, data + 1, 4);
  CHECK(s == SPARCOLL_ERR_INVALID_ARGUMENT && strstr(sparcoll_last_error(), "overlaps"), "overlap: %d", s);
  CHECK(sparcoll_deregister_buffer(comm, data) == SPARCOLL_SUCCESS, "deregister: %s", sparcoll_last_error());
  s = sparcoll_deregister_buffer(comm, data);
  CHECK(s == SPARCOLL_ERR_INVALID_ARGUMENT && strstr(sparcoll_last_error(), "was not registered"), "twice: %d", s);
  CHECK(sparcoll_comm_destroy(comm) == SPARCOLL_SUCCESS, "destroy failed");
  CHECK(sparcoll_comm_destroy(NULL) == SPARCOLL_SUCCESS, "destroy(NULL) failed");
  free(data);
  printf("c-api: ok\n");
  return 0;
}
