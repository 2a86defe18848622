// The C API: no exception crosses it; every failure becomes a status code plus a per-thread
// message for sparcoll_last_error().
#include "sparcoll/sparcoll.h"

#include <string>

#include "api/c_api_comm.hpp"
#include "api/c_api_util.hpp"
#include "api/c_handles.hpp"
#include "api/c_options.hpp"
#include "common/config.hpp"
#include "sparcoll/communicator.hpp"


namespace sparcoll::capi {

std::string& last_error() {
  thread_local std::string message;
  return message;
}

}  // namespace sparcoll::capi

namespace {

using sparcoll::capi::guarded;
using sparcoll::capi::record;

// SPARCOLL_SUCCESS for a live communicator handle, else the error (null, or destroyed).
sparcoll_status_t check_comm(const char* call, sparcoll_comm_t comm) {
  return sparcoll::capi::check_handle(call, "comm", sparcoll::capi::HandleKind::comm, comm);
}

sparcoll_status_t bad_argument(std::string message) {
  return record(sparcoll::Status(sparcoll::ErrorCode::invalid_argument, std::move(message)));
}

// The store row of the configuration table parses `text` as SPARCOLL_STORE would; its message is
// the reason only, which the caller words in terms of its own argument.
sparcoll::Status parse_store(const char* text, sparcoll::Options* o) {
  for (const sparcoll::ConfigVariable& v : sparcoll::config_variables()) {
    if (std::string_view(v.field) == "store") return v.parse(text, o);
  }
  return sparcoll::Status(sparcoll::ErrorCode::internal, "the configuration table has no store row");
}

}  // namespace

extern "C" {

sparcoll_status_t sparcoll_comm_init(sparcoll_comm_t* comm, int rank, int size, const char* store_address,
                                     const sparcoll_options_t* options) {
  if (comm == nullptr) return sparcoll::capi::null_argument("sparcoll_comm_init", "comm");
  *comm = nullptr;
  // Checked here so the message names this call's arguments, not SPARCOLL_RANK and friends.
  if (size < 1) return bad_argument("sparcoll_comm_init: size=" + std::to_string(size) + " must be at least 1");
  if (rank < 0 || rank >= size) {
    return bad_argument("sparcoll_comm_init: rank=" + std::to_string(rank) + " must be between 0 and " +
                        std::to_string(size - 1) + " for size=" + std::to_string(size));
  }
  if (options != nullptr)
    if (const sparcoll_status_t bad = sparcoll::capi::check_handle("sparcoll_comm_init", "options",
                                                                    sparcoll::capi::HandleKind::options, options);
        bad != SPARCOLL_SUCCESS)
      return bad;
  return guarded([&] {
    sparcoll::Options o = options != nullptr ? sparcoll::capi::options_of(options) : sparcoll::Options::from_env();
    o.rank = rank;
    o.world_size = size;
    if (store_address != nullptr) {
      sparcoll::Status st = parse_store(store_address, &o);
      if (!st.ok()) {
        throw sparcoll::Error(sparcoll::Status(
            st.code(), "sparcoll_comm_init: store_address='" + std::string(store_address) + "': " + st.message()));
      }
    } else if (size > 1 && o.store.empty()) {
      throw sparcoll::Error(sparcoll::Status(sparcoll::ErrorCode::invalid_argument,
                                             "sparcoll_comm_init: store_address is null and the options hold no "
                                             "store: a job of size=" + std::to_string(size) +
                                                 " needs host:port of the store rank 0 hosts"));
    }
    *comm = new sparcoll_comm{sparcoll::Communicator(o)};
    sparcoll::capi::adopt(sparcoll::capi::HandleKind::comm, *comm);
  });
}

sparcoll_status_t sparcoll_comm_init_from_env(sparcoll_comm_t* comm) {
  if (comm == nullptr) return sparcoll::capi::null_argument("sparcoll_comm_init_from_env", "comm");
  *comm = nullptr;
  return guarded([&] {
    *comm = new sparcoll_comm{sparcoll::Communicator::from_env()};
    sparcoll::capi::adopt(sparcoll::capi::HandleKind::comm, *comm);
  });
}

sparcoll_status_t sparcoll_comm_rank(sparcoll_comm_t comm, int* rank) {
  if (const sparcoll_status_t bad = check_comm("sparcoll_comm_rank", comm); bad != SPARCOLL_SUCCESS) return bad;
  if (rank == nullptr) return sparcoll::capi::null_argument("sparcoll_comm_rank", "rank");
  *rank = comm->comm.rank();
  return SPARCOLL_SUCCESS;
}

sparcoll_status_t sparcoll_comm_size(sparcoll_comm_t comm, int* size) {
  if (const sparcoll_status_t bad = check_comm("sparcoll_comm_size", comm); bad != SPARCOLL_SUCCESS) return bad;
  if (size == nullptr) return sparcoll::capi::null_argument("sparcoll_comm_size", "size");
  *size = comm->comm.size();
  return SPARCOLL_SUCCESS;
}

sparcoll_status_t sparcoll_allreduce(sparcoll_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                     sparcoll_dtype_t dtype, sparcoll_op_t op) {
  if (const sparcoll_status_t bad = check_comm("sparcoll_allreduce", comm); bad != SPARCOLL_SUCCESS) return bad;
  return guarded([&] {
    comm->comm.allreduce(sendbuf, recvbuf, count, sparcoll::capi::dtype_of(dtype), sparcoll::capi::op_of(op));
  });
}

sparcoll_status_t sparcoll_barrier(sparcoll_comm_t comm) {
  if (const sparcoll_status_t bad = check_comm("sparcoll_barrier", comm); bad != SPARCOLL_SUCCESS) return bad;
  return guarded([&] { comm->comm.barrier(); });
}

sparcoll_status_t sparcoll_register_buffer(sparcoll_comm_t comm, const void* buffer, size_t bytes) {
  if (const sparcoll_status_t bad = check_comm("sparcoll_register_buffer", comm); bad != SPARCOLL_SUCCESS) return bad;
  return guarded([&] { comm->comm.register_buffer(buffer, bytes); });
}

sparcoll_status_t sparcoll_deregister_buffer(sparcoll_comm_t comm, const void* buffer) {
  if (const sparcoll_status_t bad = check_comm("sparcoll_deregister_buffer", comm); bad != SPARCOLL_SUCCESS) return bad;
  return guarded([&] { comm->comm.deregister_buffer(buffer); });
}

sparcoll_status_t sparcoll_comm_destroy(sparcoll_comm_t comm) {
  if (comm == nullptr) return SPARCOLL_SUCCESS;
  if (!sparcoll::capi::release(sparcoll::capi::HandleKind::comm, comm))
    return sparcoll::capi::not_live("sparcoll_comm_destroy", "comm", comm);
  return guarded([&] { delete comm; });
}

const char* sparcoll_strerror(sparcoll_status_t status) {
  // ErrorCode has a fixed underlying type (int): any value converts, unknown ones get a name too.
  return sparcoll::error_code_name(static_cast<sparcoll::ErrorCode>(sparcoll::capi::raw_value(status)));
}

const char* sparcoll_last_error(void) { return sparcoll::capi::last_error().c_str(); }

}  // extern "C"
