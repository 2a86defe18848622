// sparcoll_options_t: create, set by name (the SPARCOLL_* names and values, parsed by the
// configuration table), destroy. The communicator copies the Options, so a handle may be
// destroyed right after sparcoll_comm_init.
#include "api/c_options.hpp"

#include <string>

#include "api/c_api_util.hpp"
#include "api/c_handles.hpp"
#include "common/config.hpp"

struct sparcoll_options {
  sparcoll::Options options;
};

namespace sparcoll::capi {

const Options& options_of(const sparcoll_options_t* handle) { return handle->options; }

}  // namespace sparcoll::capi

extern "C" {

sparcoll_status_t sparcoll_options_create(sparcoll_options_t** options) {
  if (options == nullptr) return sparcoll::capi::null_argument("sparcoll_options_create", "options");
  *options = nullptr;
  return sparcoll::capi::guarded([&] {
    *options = new sparcoll_options{};
    sparcoll::capi::adopt(sparcoll::capi::HandleKind::options, *options);
  });
}

sparcoll_status_t sparcoll_options_create_from_env(sparcoll_options_t** options) {
  if (options == nullptr) return sparcoll::capi::null_argument("sparcoll_options_create_from_env", "options");
  *options = nullptr;
  return sparcoll::capi::guarded([&] {
    *options = new sparcoll_options{sparcoll::Options::from_env()};
    sparcoll::capi::adopt(sparcoll::capi::HandleKind::options, *options);
  });
}

sparcoll_status_t sparcoll_options_set(sparcoll_options_t* options, const char* key, const char* value) {
  constexpr const char* kCall = "sparcoll_options_set";
  if (const sparcoll_status_t bad =
          sparcoll::capi::check_handle(kCall, "options", sparcoll::capi::HandleKind::options, options);
      bad != SPARCOLL_SUCCESS)
    return bad;
  if (key == nullptr) return sparcoll::capi::null_argument(kCall, "key");
  if (value == nullptr) {
    return sparcoll::capi::record(sparcoll::Status(sparcoll::ErrorCode::invalid_argument,
                                                   std::string(kCall) + ": value of " + key + " is null"));
  }
  return sparcoll::capi::guarded([&] {
    // Parsed into a copy first: a rejected value leaves the handle as it was.
    sparcoll::Options changed = options->options;
    sparcoll::Status st = sparcoll::set_config_value(&changed, key, value);
    if (!st.ok()) throw sparcoll::Error(sparcoll::Status(st.code(), std::string(kCall) + ": " + st.message()));
    options->options = std::move(changed);
  });
}

sparcoll_status_t sparcoll_options_destroy(sparcoll_options_t* options) {
  if (options == nullptr) return SPARCOLL_SUCCESS;
  if (!sparcoll::capi::release(sparcoll::capi::HandleKind::options, options))
    return sparcoll::capi::not_live("sparcoll_options_destroy", "options", options);
  return sparcoll::capi::guarded([&] { delete options; });
}

}  // extern "C"
