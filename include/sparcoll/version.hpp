// The library's version at run time; SPARCOLL_VERSION_* (version.h) are the headers' version at
// compile time, so a program can tell when it runs against another library than it was built for.
#pragma once

#include "sparcoll/version.h"

namespace sparcoll {

// "0.1.0": the version of the libsparcoll the program runs with.
const char* version() noexcept;
// major * 10000 + minor * 100 + patch, comparable with SPARCOLL_VERSION_NUMBER.
int version_number() noexcept;

}  // namespace sparcoll
