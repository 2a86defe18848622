// sparcoll_options_t of the C API (sparcoll.h): an Options behind an opaque handle, so fields can
// be added to Options without changing the C ABI.
#pragma once

#include "sparcoll/options.hpp"
#include "sparcoll/sparcoll.h"

namespace sparcoll::capi {

// The Options a handle holds (for sparcoll_comm_init).
const Options& options_of(const sparcoll_options_t* handle);

}  // namespace sparcoll::capi
