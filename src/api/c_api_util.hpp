// Shared by the C API's files (c_api.cpp, c_api_collectives.cpp, c_options.cpp): turning a
// Status or an exception into a sparcoll_status_t plus this thread's message for
// sparcoll_last_error().
#pragma once

#include <new>
#include <string>

#include "sparcoll/sparcoll.h"
#include "sparcoll/status.hpp"

namespace sparcoll::capi {

// This thread's message for sparcoll_last_error().
std::string& last_error();

inline sparcoll_status_t record(const Status& s) {
  last_error() = s.ok() ? std::string() : s.to_string();
  return static_cast<sparcoll_status_t>(s.code());
}

// `call: what is null`, as invalid_argument.
inline sparcoll_status_t null_argument(const char* call, const char* what) {
  return record(Status(ErrorCode::invalid_argument, std::string(call) + ": " + what + " is null"));
}

// Runs `body`, converting any exception into a status: no exception may cross the C ABI.
template <typename F>
sparcoll_status_t guarded(F&& body) {
  try {
    body();
    last_error().clear();
    return SPARCOLL_SUCCESS;
  } catch (const Error& e) {
    return record(e.status());
  } catch (const std::bad_alloc&) {
    return record(Status(ErrorCode::no_resource, "out of memory"));
  } catch (const std::exception& e) {
    return record(Status(ErrorCode::internal, e.what()));
  }
}

}  // namespace sparcoll::capi
