// Shared by the C API's files (c_api.cpp, c_api_collectives.cpp, c_api_sparse.cpp,
// c_options.cpp): turning a Status or an exception into a sparcoll_status_t plus this thread's
// message for sparcoll_last_error(), and a C enum argument into its C++ enum.
#pragma once

#include <cstring>
#include <new>
#include <string>

#include "sparcoll/sparcoll.h"
#include "sparcoll/status.hpp"
#include "sparcoll/types.hpp"

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

// The integer a C caller passed for a C enum argument. In C, (sparcoll_dtype_t)99 is a valid
// value of the enum's integer type; in C++ an enum without a fixed underlying type holds only
// the values its enumerators' bits span (0..3 for sparcoll_dtype_t), and reading 99 through
// the enum type is undefined behaviour (UBSan: "load of value 99, which is not a valid value
// for type 'sparcoll_dtype_t'"). So the argument's bytes are copied out, which is defined
// whatever they hold, and only that integer is looked at.
template <typename CEnum>
int raw_value(const CEnum& value) {
  static_assert(sizeof(CEnum) == sizeof(int), "C enums of this API are int-sized");
  int raw;
  std::memcpy(&raw, &value, sizeof raw);
  return raw;
}

// The C++ enums are bytes (a fixed underlying type, so every byte value is a valid object). A
// value that does not fit a byte becomes 255 (no valid value of any of them) rather than
// wrapping onto a valid one: the C++ layer then fails the collective on every rank as the
// invalid argument it is, which a local rejection here would not (the other ranks would wait
// for this one).
template <typename E, typename CEnum>
E to_cpp(const CEnum& value) {
  const int raw = raw_value(value);
  return static_cast<E>(raw >= 0 && raw <= 0xff ? raw : 0xff);
}

inline DataType dtype_of(const sparcoll_dtype_t& t) { return to_cpp<DataType>(t); }
inline ReduceOp op_of(const sparcoll_op_t& op) { return to_cpp<ReduceOp>(op); }
inline Algorithm algo_of(const sparcoll_algo_t& a) { return to_cpp<Algorithm>(a); }
inline Algorithm algo_of(const sparcoll_sparse_algorithm_t& a) { return to_cpp<Algorithm>(a); }

}  // namespace sparcoll::capi
