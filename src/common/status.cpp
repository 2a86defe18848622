#include "sparcoll/status.hpp"

namespace sparcoll {

const char* error_code_name(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::ok: return "ok";
    case ErrorCode::invalid_argument: return "invalid argument";
    case ErrorCode::mismatch: return "mismatch across ranks";
    case ErrorCode::peer_failure: return "peer failure";
    case ErrorCode::timeout: return "timeout";
    case ErrorCode::protocol_error: return "protocol error";
    case ErrorCode::no_resource: return "no resource";
    case ErrorCode::system_error: return "system error";
    case ErrorCode::unsupported: return "unsupported";
    case ErrorCode::internal: return "internal error";
    case ErrorCode::auth_failure: return "authentication failure";
    case ErrorCode::broken: return "communicator broken";
  }
  return "unknown error";
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  return std::string(error_code_name(code_)) + ": " + message_;
}

}  // namespace sparcoll
