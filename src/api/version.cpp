// The library's version at run time (sparcoll_version, sparcoll::version): compiled from the
// same generated version.h the installed headers carry, so a program comparing the two sees
// whether it runs against the library it was built for.
#include "sparcoll/sparcoll.h"
#include "sparcoll/version.hpp"

namespace sparcoll {

const char* version() noexcept { return SPARCOLL_VERSION_STRING; }
int version_number() noexcept { return SPARCOLL_VERSION_NUMBER; }

}  // namespace sparcoll

extern "C" {

const char* sparcoll_version(void) { return sparcoll::version(); }
int sparcoll_version_number(void) { return sparcoll::version_number(); }

}  // extern "C"
