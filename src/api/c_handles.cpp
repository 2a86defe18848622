#include "api/c_handles.hpp"

#include <cstdio>
#include <mutex>
#include <string>
#include <unordered_map>

#include "api/c_api_util.hpp"

namespace sparcoll::capi {
namespace {

std::mutex& handles_mutex() {
  static std::mutex m;
  return m;
}

// Leaked on purpose: a handle destroyed from a static destructor at exit must still find it.
std::unordered_map<const void*, HandleKind>& handles() {
  static auto* map = new std::unordered_map<const void*, HandleKind>();
  return *map;
}

std::string address(const void* p) {
  char text[32];
  std::snprintf(text, sizeof text, "%p", p);
  return text;
}

}  // namespace

void adopt(HandleKind kind, const void* handle) {
  std::lock_guard<std::mutex> lock(handles_mutex());
  handles()[handle] = kind;
}

bool release(HandleKind kind, const void* handle) {
  std::lock_guard<std::mutex> lock(handles_mutex());
  auto it = handles().find(handle);
  if (it == handles().end() || it->second != kind) return false;
  handles().erase(it);
  return true;
}

sparcoll_status_t not_live(const char* call, const char* what, const void* handle) {
  return record(Status(ErrorCode::invalid_argument, std::string(call) + ": " + what + " " + address(handle) +
                                                        " is not live (destroyed already, or not made by sparcoll)"));
}

sparcoll_status_t check_handle(const char* call, const char* what, HandleKind kind, const void* handle) {
  if (handle == nullptr) return null_argument(call, what);
  {
    std::lock_guard<std::mutex> lock(handles_mutex());
    auto it = handles().find(handle);
    if (it != handles().end() && it->second == kind) return SPARCOLL_SUCCESS;
  }
  return not_live(call, what, handle);
}

}  // namespace sparcoll::capi
