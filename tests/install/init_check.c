/* sparcoll-init-check: a job whose rendezvous the program does itself, as a framework would: it
 * is told its rank, the size and rank 0's store address, and joins with sparcoll_comm_init and
 * options set by name. Built in the tree (tests/install/meson.build) and, by install_check.sh,
 * against an installed tree through pkg-config.
 *   usage: sparcoll-init-check RANK SIZE HOST:PORT [TRANSPORT]
 * Checks the version calls against the headers, a sparse sum and an option rejected by name;
 * prints "init-check: ok <path of the libsparcoll loaded>" on success. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sparcoll/sparcoll.h"

#define CHECK(cond, ...)                          \
  do {                                            \
    if (!(cond)) {                                \
      fprintf(stderr, "init-check: " __VA_ARGS__); \
      fprintf(stderr, "\n");                      \
      return 1;                                   \
    }                                             \
  } while (0)

/* The path of the libsparcoll this process mapped, so the caller can tell which copy ran. */
static void loaded_library(char* path, size_t size) {
  FILE* maps = fopen("/proc/self/maps", "r");
  char line[4096];
  snprintf(path, size, "(unknown)");
  while (maps != NULL && fgets(line, sizeof line, maps) != NULL) {
    char* at = strchr(line, '/');
    if (at == NULL || strstr(at, "libsparcoll.so") == NULL) continue;
    at[strcspn(at, "\n")] = '\0';
    snprintf(path, size, "%s", at);
    break;
  }
  if (maps != NULL) fclose(maps);
}

int main(int argc, char** argv) {
  CHECK(argc == 4 || argc == 5, "usage: sparcoll-init-check RANK SIZE HOST:PORT [TRANSPORT]");
  const int rank = atoi(argv[1]), size = atoi(argv[2]);
  CHECK(strcmp(sparcoll_version(), SPARCOLL_VERSION_STRING) == 0 && sparcoll_version_number() == SPARCOLL_VERSION_NUMBER,
        "library version %s (%d) is not the headers' %s", sparcoll_version(), sparcoll_version_number(),
        SPARCOLL_VERSION_STRING);

  sparcoll_options_t* options = NULL;
  CHECK(sparcoll_options_create(&options) == SPARCOLL_SUCCESS, "options: %s", sparcoll_last_error());
  CHECK(sparcoll_options_set(options, "block_elems", "64") == SPARCOLL_SUCCESS, "block_elems: %s", sparcoll_last_error());
  CHECK(sparcoll_options_set(options, "SPARCOLL_LANES", "8") == SPARCOLL_SUCCESS, "lanes: %s", sparcoll_last_error());
  if (argc == 5)
    CHECK(sparcoll_options_set(options, "transport", argv[4]) == SPARCOLL_SUCCESS, "transport: %s", sparcoll_last_error());
  CHECK(sparcoll_options_set(options, "lanes", "many") == SPARCOLL_ERR_INVALID_ARGUMENT &&
            strstr(sparcoll_last_error(), "lanes='many' (SPARCOLL_LANES)") != NULL,
        "a bad value was not rejected by name: %s", sparcoll_last_error());

  sparcoll_comm_t comm = NULL;
  sparcoll_status_t s = sparcoll_comm_init(&comm, rank, size, argv[3], options);
  CHECK(s == SPARCOLL_SUCCESS, "init failed: %s", sparcoll_last_error());
  CHECK(sparcoll_options_destroy(options) == SPARCOLL_SUCCESS, "options destroy failed");
  int got_rank = -1, got_size = -1;
  CHECK(sparcoll_comm_rank(comm, &got_rank) == SPARCOLL_SUCCESS && got_rank == rank, "rank %d, not %d", got_rank, rank);
  CHECK(sparcoll_comm_size(comm, &got_size) == SPARCOLL_SUCCESS && got_size == size, "size %d, not %d", got_size, size);

  enum { N = 4096 };
  float* data = malloc(N * sizeof(float));
  CHECK(data != NULL, "out of memory");
  /* Blocks of 64: rank r fills every (r + 2)th block, so some blocks are zero everywhere. */
  for (int i = 0; i < N; ++i) data[i] = ((i / 64) % (rank + 2) == 0) ? (float)(rank + 1) : 0.0f;
  s = sparcoll_allreduce(comm, data, data, N, SPARCOLL_FLOAT32, SPARCOLL_SUM);
  CHECK(s == SPARCOLL_SUCCESS, "allreduce failed: %s", sparcoll_last_error());
  for (int i = 0; i < N; ++i) {
    float want = 0.0f;
    for (int r = 0; r < size; ++r) want += ((i / 64) % (r + 2) == 0) ? (float)(r + 1) : 0.0f;
    CHECK(data[i] == want, "wrong sum at %d: %f, not %f", i, data[i], want);
  }
  CHECK(sparcoll_comm_destroy(comm) == SPARCOLL_SUCCESS, "destroy: %s", sparcoll_last_error());
  free(data);
  char path[4096];
  loaded_library(path, sizeof path);
  printf("init-check: ok %s\n", path);
  return 0;
}
