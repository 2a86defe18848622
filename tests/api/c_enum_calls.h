/* C API calls whose enum arguments are given as plain ints and cast in C (c_enum_calls.c), as a
 * C program may pass any int: in C that cast is defined, in C++ a cast of 99 to an enum whose
 * enumerators span 0..3 is itself undefined, so c_enum_values_test.cpp cannot make it. */
#ifndef SPARCOLL_TESTS_C_ENUM_CALLS_H
#define SPARCOLL_TESTS_C_ENUM_CALLS_H

#include "sparcoll/sparcoll.h"

#ifdef __cplusplus
extern "C" {
#endif

sparcoll_status_t c_enum_allreduce(sparcoll_comm_t comm, float* buf, size_t n, int dtype, int op);
sparcoll_status_t c_enum_allreduce_algo(sparcoll_comm_t comm, float* buf, size_t n, int dtype, int op, int algo);
sparcoll_status_t c_enum_iallreduce(sparcoll_comm_t comm, float* buf, size_t n, int dtype, int op, int algo);
sparcoll_status_t c_enum_broadcast(sparcoll_comm_t comm, float* buf, size_t n, int dtype);
sparcoll_status_t c_enum_allgather(sparcoll_comm_t comm, float* buf, size_t n, int dtype);
sparcoll_status_t c_enum_reduce_scatter(sparcoll_comm_t comm, float* buf, size_t n, int dtype, int op);
sparcoll_status_t c_enum_allreduce_sparse(sparcoll_comm_t comm, int dtype, int op, int algorithm,
                                          sparcoll_sparse_result_t result);
const char* c_enum_strerror(int status);

#ifdef __cplusplus
}
#endif

#endif /* SPARCOLL_TESTS_C_ENUM_CALLS_H */
