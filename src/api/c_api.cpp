// The C API: no exception crosses it; every failure becomes a status code plus a per-thread
// message for sparcoll_last_error().
#include "sparcoll/sparcoll.h"

#include "api/c_api_util.hpp"

using sparcoll::capi::guarded;
using sparcoll::capi::null_comm;
using sparcoll::capi::record;
using sparcoll::capi::t_last_error;

extern "C" {

sparcoll_status_t sparcoll_comm_init_from_env(sparcoll_comm_t* comm) {
  if (comm == nullptr) return null_comm("sparcoll_comm_init_from_env");
  *comm = nullptr;
  return guarded([&] { *comm = new sparcoll_comm{sparcoll::Communicator::from_env()}; });
}

sparcoll_status_t sparcoll_comm_rank(sparcoll_comm_t comm, int* rank) {
  if (comm == nullptr) return null_comm("sparcoll_comm_rank");
  if (rank == nullptr)
    return record(sparcoll::Status(sparcoll::ErrorCode::invalid_argument, "sparcoll_comm_rank: rank is null"));
  *rank = comm->comm.rank();
  return SPARCOLL_SUCCESS;
}

sparcoll_status_t sparcoll_comm_size(sparcoll_comm_t comm, int* size) {
  if (comm == nullptr) return null_comm("sparcoll_comm_size");
  if (size == nullptr)
    return record(sparcoll::Status(sparcoll::ErrorCode::invalid_argument, "sparcoll_comm_size: size is null"));
  *size = comm->comm.size();
  return SPARCOLL_SUCCESS;
}

sparcoll_status_t sparcoll_allreduce(sparcoll_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                     sparcoll_dtype_t dtype, sparcoll_op_t op) {
  if (comm == nullptr) return null_comm("sparcoll_allreduce");
  return guarded([&] {
    comm->comm.allreduce(sendbuf, recvbuf, count, static_cast<sparcoll::DataType>(dtype),
                         static_cast<sparcoll::ReduceOp>(op));
  });
}

sparcoll_status_t sparcoll_barrier(sparcoll_comm_t comm) {
  if (comm == nullptr) return null_comm("sparcoll_barrier");
  return guarded([&] { comm->comm.barrier(); });
}

sparcoll_status_t sparcoll_register_buffer(sparcoll_comm_t comm, const void* buffer, size_t bytes) {
  if (comm == nullptr) return null_comm("sparcoll_register_buffer");
  return guarded([&] { comm->comm.register_buffer(buffer, bytes); });
}

sparcoll_status_t sparcoll_deregister_buffer(sparcoll_comm_t comm, const void* buffer) {
  if (comm == nullptr) return null_comm("sparcoll_deregister_buffer");
  return guarded([&] { comm->comm.deregister_buffer(buffer); });
}

sparcoll_status_t sparcoll_comm_destroy(sparcoll_comm_t comm) {
  return guarded([&] { delete comm; });
}

const char* sparcoll_strerror(sparcoll_status_t status) {
  return sparcoll::error_code_name(static_cast<sparcoll::ErrorCode>(status));
}

const char* sparcoll_last_error(void) { return t_last_error.c_str(); }

}  // extern "C"
