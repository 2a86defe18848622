// What the C API's source files share: the communicator handle and the per-thread last error
// (one error slot for every C call, whichever file implements it).
#pragma once

#include <new>
#include <string>

#include "sparcoll/communicator.hpp"
#include "sparcoll/sparcoll.h"

struct sparcoll_comm {
  sparcoll::Communicator comm;
};

namespace sparcoll::capi {

inline thread_local std::string t_last_error;

inline sparcoll_status_t record(const sparcoll::Status& s) {
  t_last_error = s.ok() ? std::string() : s.to_string();
  return static_cast<sparcoll_status_t>(s.code());
}

// Runs `body`, converting any exception into a status.
template <typename F>
sparcoll_status_t guarded(F&& body) {
  try {
    body();
    t_last_error.clear();
    return SPARCOLL_SUCCESS;
  } catch (const sparcoll::Error& e) {
    return record(e.status());
  } catch (const std::bad_alloc&) {
    return record(sparcoll::Status(sparcoll::ErrorCode::no_resource, "out of memory"));
  } catch (const std::exception& e) {
    return record(sparcoll::Status(sparcoll::ErrorCode::internal, e.what()));
  }
}

inline sparcoll_status_t null_comm(const char* call) {
  return record(sparcoll::Status(sparcoll::ErrorCode::invalid_argument, std::string(call) + ": comm is null"));
}

}  // namespace sparcoll::capi
