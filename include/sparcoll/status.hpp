// sparcoll error model.
//
// One model across the library (docs/errors.md):
//  * inside the library every fallible function returns a `Status` (or `Result<T>`); the data
//    path passes plain `ErrorCode`s and builds a message only once, where an error is first
//    classified;
//  * the C++ API (Communicator, Request) throws `sparcoll::Error`, which carries the same code;
//  * the C API (sparcoll.h) never throws: it returns the code as an int and keeps the message
//    for sparcoll_last_error().
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

namespace sparcoll {

// Values are part of the C ABI (SPARCOLL_ERR_* in sparcoll.h): append only.
enum class ErrorCode : int {
  ok = 0,
  invalid_argument = 1,  // the caller passed something wrong (null buffer, bad option value, ...)
  mismatch = 2,          // ranks disagree (count, dtype, op, configuration)
  peer_failure = 3,      // a peer died, closed its connection or reported an error
  timeout = 4,           // an operation or the rendezvous passed its deadline
  protocol_error = 5,    // a malformed, hostile or unexpected message
  no_resource = 6,       // back-pressure or exhausted resources (retryable inside the library)
  system_error = 7,      // an OS call failed (errno in the message)
  unsupported = 8,       // feature not available in this build or on this device
  internal = 9,          // a bug in sparcoll
  auth_failure = 10,     // wrong job token
  broken = 11,           // the communicator failed earlier and cannot run collectives
};

const char* error_code_name(ErrorCode code) noexcept;

class [[nodiscard]] Status {
 public:
  Status() noexcept = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() noexcept { return Status(); }

  bool ok() const noexcept { return code_ == ErrorCode::ok; }
  explicit operator bool() const noexcept { return ok(); }
  ErrorCode code() const noexcept { return code_; }
  const std::string& message() const noexcept { return message_; }
  // "timeout: op 3 lane 7 ..." — code name and message.
  std::string to_string() const;

 private:
  ErrorCode code_ = ErrorCode::ok;
  std::string message_;
};

// Exception thrown by the C++ API; what() is Status::to_string().
class Error : public std::runtime_error {
 public:
  explicit Error(Status status) : std::runtime_error(status.to_string()), status_(std::move(status)) {}
  ErrorCode code() const noexcept { return status_.code(); }
  const Status& status() const noexcept { return status_; }

 private:
  Status status_;
};

// Throws sparcoll::Error unless `status` is ok. Used at the C++ API boundary only.
inline void throw_if_error(Status status) {
  if (!status.ok()) throw Error(std::move(status));
}

}  // namespace sparcoll
