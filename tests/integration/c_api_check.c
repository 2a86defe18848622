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

  /* Dense allreduce algorithms, broadcast, allgather (out of place and in place), reduce_scatter. */
  {
    float v[300];
    for (int i = 0; i < 300; ++i) v[i] = (float)(rank + 1);
    s = sparcoll_allreduce_algo(comm, v, v, 300, SPARCOLL_FLOAT32, SPARCOLL_SUM, SPARCOLL_ALGO_RING);
    CHECK(s == SPARCOLL_SUCCESS && v[0] == want && v[299] == want, "ring allreduce: %f (%s)", v[0],
          sparcoll_last_error());
    int prod[3] = {-1, 2, rank == 0 ? 0 : 3};
    s = sparcoll_allreduce(comm, prod, prod, 3, SPARCOLL_INT32, SPARCOLL_PROD);
    CHECK(s == SPARCOLL_SUCCESS && prod[0] == (size % 2 ? -1 : 1) && prod[1] == 1 << size && prod[2] == 0,
          "product: %d %d %d (%s)", prod[0], prod[1], prod[2], sparcoll_last_error());
    int bits[2] = {1 << rank, ~0};
    s = sparcoll_allreduce(comm, bits, bits, 2, SPARCOLL_INT32, SPARCOLL_BOR);
    CHECK(s == SPARCOLL_SUCCESS && bits[0] == (int)((1u << size) - 1) && bits[1] == ~0, "bor: %d (%s)", bits[0],
          sparcoll_last_error());
    s = sparcoll_allreduce(comm, v, v, 3, SPARCOLL_FLOAT32, SPARCOLL_BAND);
    CHECK(s == SPARCOLL_ERR_INVALID_ARGUMENT && strstr(sparcoll_last_error(), "bitwise"), "band on f32: %d %s", s,
          sparcoll_last_error());
    int m[7];
    for (int i = 0; i < 7; ++i) m[i] = rank * 7 + i;
    s = sparcoll_allreduce_algo(comm, m, m, 7, SPARCOLL_INT32, SPARCOLL_MAX, SPARCOLL_ALGO_BUTTERFLY);
    CHECK(s == SPARCOLL_SUCCESS && m[0] == (size - 1) * 7 && m[6] == (size - 1) * 7 + 6, "butterfly max: %d (%s)", m[0],
          sparcoll_last_error());
    int b[100];
    for (int i = 0; i < 100; ++i) b[i] = rank == size - 1 ? i : -1;
    s = sparcoll_broadcast(comm, b, 100, SPARCOLL_INT32, size - 1);
    CHECK(s == SPARCOLL_SUCCESS && b[0] == 0 && b[99] == 99, "broadcast: %d (%s)", b[99], sparcoll_last_error());
    int mine[3] = {rank, rank * 2, rank * 3};
    int* all = malloc(3 * (size_t)size * sizeof(int));
    s = sparcoll_allgather(comm, mine, all, 3, SPARCOLL_INT32);
    CHECK(s == SPARCOLL_SUCCESS, "allgather: %s", sparcoll_last_error());
    for (int r = 0; r < size; ++r) CHECK(all[3 * r + 2] == 3 * r, "allgather: rank %d's piece is %d", r, all[3 * r + 2]);
    for (int i = 0; i < 3 * size; ++i) all[i] = i / 3 == rank ? 100 + rank : -1;
    s = sparcoll_allgather(comm, all + 3 * rank, all, 3, SPARCOLL_INT32);
    CHECK(s == SPARCOLL_SUCCESS, "allgather in place: %s", sparcoll_last_error());
    for (int r = 0; r < size; ++r) CHECK(all[3 * r] == 100 + r, "allgather in place: rank %d's piece is %d", r, all[3 * r]);
    free(all);
    float* in = malloc(4 * (size_t)size * sizeof(float));
    float out[4];
    for (int i = 0; i < 4 * size; ++i) in[i] = (float)((rank + 1) * (i + 1));
    s = sparcoll_reduce_scatter(comm, in, out, 4, SPARCOLL_FLOAT32, SPARCOLL_SUM);
    CHECK(s == SPARCOLL_SUCCESS, "reduce_scatter: %s", sparcoll_last_error());
    for (int j = 0; j < 4; ++j)
      CHECK(out[j] == want * (float)(rank * 4 + j + 1), "reduce_scatter: element %d is %f", j, out[j]);
    free(in);
  }

  /* Rooted: reduce, gather, scatter (the root's buffer NULL elsewhere), their non-blocking
     forms, and a bad root. */
  {
    const int root = size - 1;
    int v[5], red[5] = {0}, *all = malloc(2 * (size_t)size * sizeof(int)), piece[2] = {-1, -1};
    for (int i = 0; i < 5; ++i) v[i] = (rank + 1) * (i + 1);
    s = sparcoll_reduce(comm, v, rank == root ? red : NULL, 5, SPARCOLL_INT32, SPARCOLL_SUM, root);
    CHECK(s == SPARCOLL_SUCCESS, "reduce: %s", sparcoll_last_error());
    if (rank == root)
      for (int i = 0; i < 5; ++i)
        CHECK(red[i] == size * (size + 1) / 2 * (i + 1), "reduce: element %d is %d", i, red[i]);
    int mine[2] = {rank, -rank};
    s = sparcoll_gather(comm, mine, rank == 0 ? all : NULL, 2, SPARCOLL_INT32, 0);
    CHECK(s == SPARCOLL_SUCCESS, "gather: %s", sparcoll_last_error());
    if (rank == 0)
      for (int p = 0; p < size; ++p) CHECK(all[2 * p + 1] == -p, "gather: rank %d's piece is %d", p, all[2 * p + 1]);
    for (int i = 0; i < 2 * size; ++i) all[i] = 10 * i;
    s = sparcoll_scatter(comm, rank == root ? all : NULL, piece, 2, SPARCOLL_INT32, root);
    CHECK(s == SPARCOLL_SUCCESS && piece[0] == 20 * rank && piece[1] == 20 * rank + 10, "scatter: %d %d (%s)",
          piece[0], piece[1], sparcoll_last_error());
    sparcoll_request_t r[3] = {NULL, NULL, NULL};
    CHECK(sparcoll_ireduce(comm, v, v, 5, SPARCOLL_INT32, SPARCOLL_MAX, 0, &r[0]) == SPARCOLL_SUCCESS, "ireduce: %s",
          sparcoll_last_error());
    CHECK(sparcoll_igather(comm, mine, all, 2, SPARCOLL_INT32, root, &r[1]) == SPARCOLL_SUCCESS, "igather: %s",
          sparcoll_last_error());
    int* src = malloc((size_t)size * sizeof(int));
    for (int p = 0; p < size; ++p) src[p] = 7 * p;
    CHECK(sparcoll_iscatter(comm, src, piece, 1, SPARCOLL_INT32, 0, &r[2]) == SPARCOLL_SUCCESS, "iscatter: %s",
          sparcoll_last_error());
    for (int i = 0; i < 3; ++i) CHECK(sparcoll_wait(&r[i]) == SPARCOLL_SUCCESS, "wait %d: %s", i, sparcoll_last_error());
    if (rank == 0) CHECK(v[4] == size * 5, "ireduce max: %d", v[4]);
    CHECK(piece[0] == 7 * rank, "iscatter: %d", piece[0]);
    free(src);
    s = sparcoll_gather(comm, mine, all, 2, SPARCOLL_INT32, -1);
    CHECK(s == SPARCOLL_ERR_INVALID_ARGUMENT && strstr(sparcoll_last_error(), "root -1 is not a rank"),
          "gather root -1: %d %s", s, sparcoll_last_error());
    free(all);
  }

  /* all_to_all, even and uneven (rank p sends p + 1 ints to everyone), and overlapping buffers. */
  {
    int* out = malloc((size_t)size * 2 * sizeof(int));
    int* in = malloc((size_t)size * 2 * sizeof(int));
    for (int p = 0; p < size; ++p) out[2 * p] = rank * 100 + p, out[2 * p + 1] = -rank;
    s = sparcoll_all_to_all(comm, out, in, 2 * sizeof(int));
    CHECK(s == SPARCOLL_SUCCESS, "all_to_all: %s", sparcoll_last_error());
    for (int p = 0; p < size; ++p) CHECK(in[2 * p] == p * 100 + rank, "all_to_all: piece from %d is %d", p, in[2 * p]);
    size_t* sb = malloc((size_t)size * 4 * sizeof(size_t));
    size_t *so = sb + size, *rb = sb + 2 * size, *ro = sb + 3 * size;
    for (int p = 0; p < size; ++p) {
      sb[p] = (size_t)(rank % 2 + 1) * sizeof(int), so[p] = 0; /* the same ints to everyone */
      rb[p] = (size_t)(p % 2 + 1) * sizeof(int), ro[p] = 2 * (size_t)p * sizeof(int);
    }
    for (int i = 0; i < 2 * size; ++i) in[i] = -1;
    s = sparcoll_all_to_all_v(comm, out, sb, so, in, rb, ro);
    CHECK(s == SPARCOLL_SUCCESS, "all_to_all_v: %s", sparcoll_last_error());
    for (int p = 0; p < size; ++p)
      CHECK(in[2 * p] == p * 100 && (p % 2 == 0 ? in[2 * p + 1] == -1 : in[2 * p + 1] == -p),
            "all_to_all_v: piece from %d is %d %d", p, in[2 * p], in[2 * p + 1]);
    s = sparcoll_all_to_all(comm, out, out, sizeof(int));
    CHECK(s == SPARCOLL_ERR_INVALID_ARGUMENT && strstr(sparcoll_last_error(), "overlap"), "all_to_all overlap: %d %s",
          s, sparcoll_last_error());
    free(sb);
    free(in);
    free(out);
  }

  /* Coalesced: three buffers (one empty) reduced and gathered in one call each, one polled with
   * sparcoll_test; a NULL buffer with a non-zero count fails the call on every rank. */
  {
    int a[3] = {rank, rank, rank}, b[1] = {1}, c[2] = {rank * 10, -rank};
    const void* send[3] = {a, NULL, c};
    void* recv[3] = {a, NULL, c};
    const size_t counts[3] = {3, 0, 2};
    s = sparcoll_allreduce_coalesced(comm, send, recv, counts, 3, SPARCOLL_INT32, SPARCOLL_SUM);
    const int ranks_sum = size * (size - 1) / 2;
    CHECK(s == SPARCOLL_SUCCESS && a[2] == ranks_sum && c[0] == 10 * ranks_sum && c[1] == -ranks_sum,
          "allreduce_coalesced: %d %d %d (%s)", a[2], c[0], c[1], sparcoll_last_error());
    int *ga = malloc(3 * (size_t)size * sizeof(int)), *gc = malloc(2 * (size_t)size * sizeof(int));
    const int mine_a[3] = {rank, rank + 1, rank + 2}, mine_c[2] = {-rank, 7};
    const void* gsend[3] = {mine_a, b, mine_c};
    void* grecv[3] = {ga, NULL, gc};
    sparcoll_request_t r = NULL;
    CHECK(sparcoll_iallgather_coalesced(comm, gsend, grecv, counts, 3, SPARCOLL_INT32, &r) == SPARCOLL_SUCCESS,
          "iallgather_coalesced: %s", sparcoll_last_error());
    int done = 0;
    while (!done) CHECK(sparcoll_test(&r, &done) == SPARCOLL_SUCCESS, "test: %s", sparcoll_last_error());
    for (int p = 0; p < size; ++p)
      CHECK(ga[3 * p + 2] == p + 2 && gc[2 * p] == -p && gc[2 * p + 1] == 7, "allgather_coalesced: rank %d's: %d %d %d",
            p, ga[3 * p + 2], gc[2 * p], gc[2 * p + 1]);
    void* bad_recv[3] = {ga, NULL, rank == size - 1 ? NULL : gc};
    s = sparcoll_allgather_coalesced(comm, gsend, bad_recv, counts, 3, SPARCOLL_INT32);
    CHECK(s == SPARCOLL_ERR_INVALID_ARGUMENT &&
              strstr(sparcoll_last_error(), rank == size - 1 ? "recv[2] is null with count 2" : "invalid argument"),
          "allgather_coalesced with a NULL buffer: %d %s", s, sparcoll_last_error());
    free(ga);
    free(gc);
  }

  /* send and recv: a ring exchange, one from any source, and a bad peer. */
  if (size > 1) {
    int out[3] = {rank, rank * 2, rank * 3}, in[3] = {-1, -1, -1}, source = -2;
    sparcoll_request_t rr = NULL;
    CHECK(sparcoll_irecv(comm, in, sizeof in, (rank + size - 1) % size, 3, &source, &rr) == SPARCOLL_SUCCESS,
          "irecv: %s", sparcoll_last_error());
    s = sparcoll_send(comm, out, sizeof out, (rank + 1) % size, 3);
    CHECK(s == SPARCOLL_SUCCESS, "send: %s", sparcoll_last_error());
    CHECK(sparcoll_wait(&rr) == SPARCOLL_SUCCESS, "wait irecv: %s", sparcoll_last_error());
    const int left = (rank + size - 1) % size;
    CHECK(in[2] == left * 3 && source == left, "ring recv: %d from %d", in[2], source);
    if (rank == 0) {
      for (int k = 1; k < size; ++k) {
        int v = -1;
        s = sparcoll_recv(comm, &v, sizeof v, SPARCOLL_ANY_SOURCE, 4, &source);
        CHECK(s == SPARCOLL_SUCCESS && v == 100 + source, "recv any source: %d from %d (%s)", v, source,
              sparcoll_last_error());
      }
    } else {
      int v = 100 + rank;
      CHECK(sparcoll_send(comm, &v, sizeof v, 0, 4) == SPARCOLL_SUCCESS, "send to 0: %s", sparcoll_last_error());
    }
  }
  s = sparcoll_send(comm, &value, sizeof value, size, 0);
  CHECK(s == SPARCOLL_ERR_INVALID_ARGUMENT && strstr(sparcoll_last_error(), "is not a rank"), "send to %d: %d %s",
        size, s, sparcoll_last_error());

  /* Non-blocking: three collectives in flight, one polled with sparcoll_test, two waited for. */
  {
    float a[1000];
    int b[10], g[4], *gathered = malloc(4 * (size_t)size * sizeof(int));
    for (int i = 0; i < 1000; ++i) a[i] = 1.0f;
    for (int i = 0; i < 10; ++i) b[i] = rank == 0 ? 7 : 0;
    for (int i = 0; i < 4; ++i) g[i] = rank;
    sparcoll_request_t r[3] = {NULL, NULL, NULL};
    CHECK(sparcoll_iallreduce(comm, a, a, 1000, SPARCOLL_FLOAT32, SPARCOLL_SUM, SPARCOLL_ALGO_RING, &r[0]) ==
              SPARCOLL_SUCCESS && r[0] != NULL, "iallreduce: %s", sparcoll_last_error());
    CHECK(sparcoll_ibroadcast(comm, b, 10, SPARCOLL_INT32, 0, &r[1]) == SPARCOLL_SUCCESS, "ibroadcast: %s",
          sparcoll_last_error());
    CHECK(sparcoll_iallgather(comm, g, gathered, 4, SPARCOLL_INT32, &r[2]) == SPARCOLL_SUCCESS, "iallgather: %s",
          sparcoll_last_error());
    int done = 0;
    while (!done) CHECK(sparcoll_test(&r[0], &done) == SPARCOLL_SUCCESS, "test: %s", sparcoll_last_error());
    CHECK(r[0] == NULL, "a finished request is not set to NULL by sparcoll_test");
    CHECK(sparcoll_wait(&r[1]) == SPARCOLL_SUCCESS && r[1] == NULL, "wait: %s", sparcoll_last_error());
    CHECK(sparcoll_wait(&r[2]) == SPARCOLL_SUCCESS && r[2] == NULL, "wait: %s", sparcoll_last_error());
    CHECK(a[0] == (float)size && a[999] == (float)size, "iallreduce result %f", a[0]);
    CHECK(b[9] == 7, "ibroadcast result %d", b[9]);
    for (int p = 0; p < size; ++p) CHECK(gathered[4 * p + 3] == p, "iallgather: rank %d's piece", p);
    free(gathered);

    /* Bad calls: local ones (no collective started), and ones every rank makes alike, which fail
       that collective on every rank. */
    s = sparcoll_wait(NULL);
    CHECK(s == SPARCOLL_ERR_INVALID_ARGUMENT && strstr(sparcoll_last_error(), "request is null"), "wait(NULL): %d", s);
    s = sparcoll_wait(&r[0]);
    CHECK(s == SPARCOLL_ERR_INVALID_ARGUMENT && strstr(sparcoll_last_error(), "*request is null"), "wait twice: %d", s);
    s = sparcoll_test(&r[0], NULL);
    CHECK(s == SPARCOLL_ERR_INVALID_ARGUMENT && strstr(sparcoll_last_error(), "done is null"), "test(done=NULL): %d", s);
    r[0] = (sparcoll_request_t)1; /* must be overwritten */
    s = sparcoll_ibroadcast(NULL, b, 10, SPARCOLL_INT32, 0, &r[0]);
    CHECK(s == SPARCOLL_ERR_INVALID_ARGUMENT && r[0] == NULL && strstr(sparcoll_last_error(), "comm is null"),
          "ibroadcast(NULL comm): %d", s);
    s = sparcoll_allreduce_algo(comm, a, a, 1000, SPARCOLL_FLOAT32, SPARCOLL_SUM, (sparcoll_algo_t)99);
    CHECK(s == SPARCOLL_ERR_INVALID_ARGUMENT && strstr(sparcoll_last_error(), "algorithm 99"), "algo 99: %d %s", s,
          sparcoll_last_error());
    s = sparcoll_broadcast(comm, b, 10, SPARCOLL_INT32, size);
    CHECK(s == SPARCOLL_ERR_INVALID_ARGUMENT && strstr(sparcoll_last_error(), "is not a rank"), "root %d: %d %s", size,
          s, sparcoll_last_error());
    /* 300 does not fit the C++ enum's byte: it must stay invalid, not wrap onto f16 (300 % 256 = 44). */
    s = sparcoll_allgather(comm, g, g, 0, (sparcoll_dtype_t)300);
    CHECK(s == SPARCOLL_ERR_INVALID_ARGUMENT && strstr(sparcoll_last_error(), "dtype"), "dtype 300: %d %s", s,
          sparcoll_last_error());
    CHECK(sparcoll_ireduce_scatter(comm, NULL, a, 5, SPARCOLL_FLOAT32, SPARCOLL_SUM, &r[0]) == SPARCOLL_SUCCESS,
          "ireduce_scatter with a null sendbuf must start (and fail on every rank): %s", sparcoll_last_error());
    s = sparcoll_wait(&r[0]);
    CHECK(s == SPARCOLL_ERR_INVALID_ARGUMENT && strstr(sparcoll_last_error(), "sendbuf is null") && r[0] == NULL,
          "null sendbuf: %d %s", s, sparcoll_last_error());
    /* Freed while in flight: waits for it, so the buffer is final afterwards. */
    for (int i = 0; i < 10; ++i) b[i] = rank == 0 ? 9 : 0;
    CHECK(sparcoll_ibroadcast(comm, b, 10, SPARCOLL_INT32, 0, &r[0]) == SPARCOLL_SUCCESS, "ibroadcast: %s",
          sparcoll_last_error());
    CHECK(sparcoll_request_free(r[0]) == SPARCOLL_SUCCESS && b[0] == 9, "request_free: %d", b[0]);
    CHECK(sparcoll_request_free(NULL) == SPARCOLL_SUCCESS, "request_free(NULL)");
  }

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
