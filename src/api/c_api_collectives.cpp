// The C API of the collectives beyond allreduce (broadcast, allgather, reduce_scatter, reduce,
// gather, scatter, all_to_all), of send and recv, of the per-call algorithm, and of non-blocking calls (sparcoll_request_t over sparcoll::Request).
#include <string>

#include "api/c_api_comm.hpp"
#include "api/c_api_util.hpp"
#include "api/c_handles.hpp"
#include "sparcoll/sparcoll.h"

struct sparcoll_request {
  sparcoll::Request request;
};

namespace {

using sparcoll::capi::algo_of;
using sparcoll::capi::dtype_of;
using sparcoll::capi::guarded;
using sparcoll::capi::HandleKind;
using sparcoll::capi::null_argument;
using sparcoll::capi::op_of;

sparcoll_status_t check_comm(const char* call, sparcoll_comm_t comm) {
  return sparcoll::capi::check_handle(call, "comm", HandleKind::comm, comm);
}

sparcoll_status_t freed_request(const char* call) {
  return sparcoll::capi::record(sparcoll::Status(
      sparcoll::ErrorCode::invalid_argument,
      std::string(call) + ": *request is null (a finished request is freed and set to NULL by sparcoll_wait and "
                          "sparcoll_test)"));
}

sparcoll_status_t check_request(const char* call, sparcoll_request_t request) {
  return sparcoll::capi::check_handle(call, "*request", HandleKind::request, request);
}

// Frees a finished request once, even if two threads finish it at the same time.
void free_request(sparcoll_request_t request) {
  if (sparcoll::capi::release(HandleKind::request, request)) delete request;
}

// Starts a collective through `start` (returning a sparcoll::Request) into *request.
template <typename F>
sparcoll_status_t start_request(const char* call, sparcoll_comm_t comm, sparcoll_request_t* request, F&& start) {
  if (request == nullptr) return null_argument(call, "request");
  *request = nullptr;
  if (const sparcoll_status_t bad = check_comm(call, comm); bad != SPARCOLL_SUCCESS) return bad;
  return guarded([&] {
    *request = new sparcoll_request{start(comm->comm)};
    sparcoll::capi::adopt(HandleKind::request, *request);
  });
}

}  // namespace

extern "C" {

sparcoll_status_t sparcoll_allreduce_algo(sparcoll_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                          sparcoll_dtype_t dtype, sparcoll_op_t op, sparcoll_algo_t algo) {
  if (const sparcoll_status_t bad = check_comm("sparcoll_allreduce_algo", comm); bad != SPARCOLL_SUCCESS) return bad;
  return guarded([&] { comm->comm.allreduce(sendbuf, recvbuf, count, dtype_of(dtype), op_of(op), algo_of(algo)); });
}

sparcoll_status_t sparcoll_broadcast(sparcoll_comm_t comm, void* buffer, size_t count, sparcoll_dtype_t dtype,
                                     int root) {
  if (const sparcoll_status_t bad = check_comm("sparcoll_broadcast", comm); bad != SPARCOLL_SUCCESS) return bad;
  return guarded([&] { comm->comm.broadcast(buffer, count, dtype_of(dtype), root); });
}

sparcoll_status_t sparcoll_allgather(sparcoll_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                     sparcoll_dtype_t dtype) {
  if (const sparcoll_status_t bad = check_comm("sparcoll_allgather", comm); bad != SPARCOLL_SUCCESS) return bad;
  return guarded([&] { comm->comm.allgather(sendbuf, recvbuf, count, dtype_of(dtype)); });
}

sparcoll_status_t sparcoll_reduce_scatter(sparcoll_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                          sparcoll_dtype_t dtype, sparcoll_op_t op) {
  if (const sparcoll_status_t bad = check_comm("sparcoll_reduce_scatter", comm); bad != SPARCOLL_SUCCESS) return bad;
  return guarded([&] { comm->comm.reduce_scatter(sendbuf, recvbuf, count, dtype_of(dtype), op_of(op)); });
}

sparcoll_status_t sparcoll_reduce(sparcoll_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                  sparcoll_dtype_t dtype, sparcoll_op_t op, int root) {
  if (const sparcoll_status_t bad = check_comm("sparcoll_reduce", comm); bad != SPARCOLL_SUCCESS) return bad;
  return guarded([&] { comm->comm.reduce(sendbuf, recvbuf, count, dtype_of(dtype), op_of(op), root); });
}

sparcoll_status_t sparcoll_gather(sparcoll_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                  sparcoll_dtype_t dtype, int root) {
  if (const sparcoll_status_t bad = check_comm("sparcoll_gather", comm); bad != SPARCOLL_SUCCESS) return bad;
  return guarded([&] { comm->comm.gather(sendbuf, recvbuf, count, dtype_of(dtype), root); });
}

sparcoll_status_t sparcoll_scatter(sparcoll_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                   sparcoll_dtype_t dtype, int root) {
  if (const sparcoll_status_t bad = check_comm("sparcoll_scatter", comm); bad != SPARCOLL_SUCCESS) return bad;
  return guarded([&] { comm->comm.scatter(sendbuf, recvbuf, count, dtype_of(dtype), root); });
}

sparcoll_status_t sparcoll_all_to_all(sparcoll_comm_t comm, const void* sendbuf, void* recvbuf, size_t bytes_per_rank) {
  if (const sparcoll_status_t bad = check_comm("sparcoll_all_to_all", comm); bad != SPARCOLL_SUCCESS) return bad;
  return guarded([&] { comm->comm.all_to_all(sendbuf, recvbuf, bytes_per_rank); });
}

sparcoll_status_t sparcoll_all_to_all_v(sparcoll_comm_t comm, const void* sendbuf, const size_t* send_bytes,
                                        const size_t* send_offsets, void* recvbuf, const size_t* recv_bytes,
                                        const size_t* recv_offsets) {
  if (const sparcoll_status_t bad = check_comm("sparcoll_all_to_all_v", comm); bad != SPARCOLL_SUCCESS) return bad;
  return guarded(
      [&] { comm->comm.all_to_all_v(sendbuf, send_bytes, send_offsets, recvbuf, recv_bytes, recv_offsets); });
}

sparcoll_status_t sparcoll_send(sparcoll_comm_t comm, const void* buf, size_t bytes, int peer, int tag) {
  if (const sparcoll_status_t bad = check_comm("sparcoll_send", comm); bad != SPARCOLL_SUCCESS) return bad;
  return guarded([&] { comm->comm.send(buf, bytes, peer, tag); });
}

sparcoll_status_t sparcoll_recv(sparcoll_comm_t comm, void* buf, size_t bytes, int peer, int tag, int* source) {
  if (const sparcoll_status_t bad = check_comm("sparcoll_recv", comm); bad != SPARCOLL_SUCCESS) return bad;
  return guarded([&] { comm->comm.recv(buf, bytes, peer, tag, source); });
}

sparcoll_status_t sparcoll_iallreduce(sparcoll_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                      sparcoll_dtype_t dtype, sparcoll_op_t op, sparcoll_algo_t algo,
                                      sparcoll_request_t* request) {
  return start_request("sparcoll_iallreduce", comm, request, [&](sparcoll::Communicator& c) {
    return c.iallreduce(sendbuf, recvbuf, count, dtype_of(dtype), op_of(op), algo_of(algo));
  });
}

sparcoll_status_t sparcoll_ibroadcast(sparcoll_comm_t comm, void* buffer, size_t count, sparcoll_dtype_t dtype,
                                      int root, sparcoll_request_t* request) {
  return start_request("sparcoll_ibroadcast", comm, request, [&](sparcoll::Communicator& c) {
    return c.ibroadcast(buffer, count, dtype_of(dtype), root);
  });
}

sparcoll_status_t sparcoll_iallgather(sparcoll_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                      sparcoll_dtype_t dtype, sparcoll_request_t* request) {
  return start_request("sparcoll_iallgather", comm, request, [&](sparcoll::Communicator& c) {
    return c.iallgather(sendbuf, recvbuf, count, dtype_of(dtype));
  });
}

sparcoll_status_t sparcoll_ireduce_scatter(sparcoll_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                           sparcoll_dtype_t dtype, sparcoll_op_t op, sparcoll_request_t* request) {
  return start_request("sparcoll_ireduce_scatter", comm, request, [&](sparcoll::Communicator& c) {
    return c.ireduce_scatter(sendbuf, recvbuf, count, dtype_of(dtype), op_of(op));
  });
}

sparcoll_status_t sparcoll_ireduce(sparcoll_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                   sparcoll_dtype_t dtype, sparcoll_op_t op, int root, sparcoll_request_t* request) {
  return start_request("sparcoll_ireduce", comm, request, [&](sparcoll::Communicator& c) {
    return c.ireduce(sendbuf, recvbuf, count, dtype_of(dtype), op_of(op), root);
  });
}

sparcoll_status_t sparcoll_igather(sparcoll_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                   sparcoll_dtype_t dtype, int root, sparcoll_request_t* request) {
  return start_request("sparcoll_igather", comm, request, [&](sparcoll::Communicator& c) {
    return c.igather(sendbuf, recvbuf, count, dtype_of(dtype), root);
  });
}

sparcoll_status_t sparcoll_iscatter(sparcoll_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                    sparcoll_dtype_t dtype, int root, sparcoll_request_t* request) {
  return start_request("sparcoll_iscatter", comm, request, [&](sparcoll::Communicator& c) {
    return c.iscatter(sendbuf, recvbuf, count, dtype_of(dtype), root);
  });
}

sparcoll_status_t sparcoll_iall_to_all(sparcoll_comm_t comm, const void* sendbuf, void* recvbuf,
                                       size_t bytes_per_rank, sparcoll_request_t* request) {
  return start_request("sparcoll_iall_to_all", comm, request,
                       [&](sparcoll::Communicator& c) { return c.iall_to_all(sendbuf, recvbuf, bytes_per_rank); });
}

sparcoll_status_t sparcoll_iall_to_all_v(sparcoll_comm_t comm, const void* sendbuf, const size_t* send_bytes,
                                         const size_t* send_offsets, void* recvbuf, const size_t* recv_bytes,
                                         const size_t* recv_offsets, sparcoll_request_t* request) {
  return start_request("sparcoll_iall_to_all_v", comm, request, [&](sparcoll::Communicator& c) {
    return c.iall_to_all_v(sendbuf, send_bytes, send_offsets, recvbuf, recv_bytes, recv_offsets);
  });
}

sparcoll_status_t sparcoll_isend(sparcoll_comm_t comm, const void* buf, size_t bytes, int peer, int tag,
                                 sparcoll_request_t* request) {
  return start_request("sparcoll_isend", comm, request,
                       [&](sparcoll::Communicator& c) { return c.isend(buf, bytes, peer, tag); });
}

sparcoll_status_t sparcoll_irecv(sparcoll_comm_t comm, void* buf, size_t bytes, int peer, int tag, int* source,
                                 sparcoll_request_t* request) {
  return start_request("sparcoll_irecv", comm, request,
                       [&](sparcoll::Communicator& c) { return c.irecv(buf, bytes, peer, tag, source); });
}

sparcoll_status_t sparcoll_allreduce_coalesced(sparcoll_comm_t comm, const void* const* sendbufs, void* const* recvbufs,
                                               const size_t* counts, size_t n, sparcoll_dtype_t dtype,
                                               sparcoll_op_t op) {
  if (const sparcoll_status_t bad = check_comm("sparcoll_allreduce_coalesced", comm); bad != SPARCOLL_SUCCESS) return bad;
  return guarded([&] { comm->comm.allreduce_coalesced(sendbufs, recvbufs, counts, n, dtype_of(dtype), op_of(op)); });
}

sparcoll_status_t sparcoll_allgather_coalesced(sparcoll_comm_t comm, const void* const* sendbufs, void* const* recvbufs,
                                               const size_t* counts, size_t n, sparcoll_dtype_t dtype) {
  if (const sparcoll_status_t bad = check_comm("sparcoll_allgather_coalesced", comm); bad != SPARCOLL_SUCCESS) return bad;
  return guarded([&] { comm->comm.allgather_coalesced(sendbufs, recvbufs, counts, n, dtype_of(dtype)); });
}

sparcoll_status_t sparcoll_iallreduce_coalesced(sparcoll_comm_t comm, const void* const* sendbufs,
                                                void* const* recvbufs, const size_t* counts, size_t n,
                                                sparcoll_dtype_t dtype, sparcoll_op_t op, sparcoll_request_t* request) {
  return start_request("sparcoll_iallreduce_coalesced", comm, request, [&](sparcoll::Communicator& c) {
    return c.iallreduce_coalesced(sendbufs, recvbufs, counts, n, dtype_of(dtype), op_of(op));
  });
}

sparcoll_status_t sparcoll_iallgather_coalesced(sparcoll_comm_t comm, const void* const* sendbufs,
                                                void* const* recvbufs, const size_t* counts, size_t n,
                                                sparcoll_dtype_t dtype, sparcoll_request_t* request) {
  return start_request("sparcoll_iallgather_coalesced", comm, request, [&](sparcoll::Communicator& c) {
    return c.iallgather_coalesced(sendbufs, recvbufs, counts, n, dtype_of(dtype));
  });
}

sparcoll_status_t sparcoll_wait(sparcoll_request_t* request) {
  if (request == nullptr) return null_argument("sparcoll_wait", "request");
  if (*request == nullptr) return freed_request("sparcoll_wait");
  if (const sparcoll_status_t bad = check_request("sparcoll_wait", *request); bad != SPARCOLL_SUCCESS) return bad;
  const sparcoll_status_t s = guarded([&] { (*request)->request.wait(); });
  free_request(*request);
  *request = nullptr;
  return s;
}

sparcoll_status_t sparcoll_test(sparcoll_request_t* request, int* done) {
  if (request == nullptr) return null_argument("sparcoll_test", "request");
  if (done == nullptr) return null_argument("sparcoll_test", "done");
  *done = 0;
  if (*request == nullptr) return freed_request("sparcoll_test");
  if (const sparcoll_status_t bad = check_request("sparcoll_test", *request); bad != SPARCOLL_SUCCESS) return bad;
  bool finished = false;
  const sparcoll_status_t s = guarded([&] { finished = (*request)->request.test(); });
  // test() throws only for a finished collective that failed.
  if (s != SPARCOLL_SUCCESS) finished = true;
  if (!finished) return SPARCOLL_SUCCESS;
  free_request(*request);
  *request = nullptr;
  *done = 1;
  return s;
}

sparcoll_status_t sparcoll_request_free(sparcoll_request_t request) {
  if (request == nullptr) return SPARCOLL_SUCCESS;
  if (!sparcoll::capi::release(HandleKind::request, request))
    return sparcoll::capi::not_live("sparcoll_request_free", "request", request);
  // ~Request waits for the collective: the library may still use the caller's buffers.
  return guarded([&] { delete request; });
}

}  // extern "C"
