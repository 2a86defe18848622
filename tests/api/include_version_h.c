/* Compiles include/sparcoll/version.h (generated) on its own, as C, and checks its macros are
 * usable in #if, where programs test them. */
#include "sparcoll/version.h"

#if SPARCOLL_VERSION_NUMBER < 0 || SPARCOLL_VERSION_NUMBER != SPARCOLL_VERSION_MAJOR * 10000 + SPARCOLL_VERSION_MINOR * 100 + SPARCOLL_VERSION_PATCH
#error "SPARCOLL_VERSION_NUMBER disagrees with SPARCOLL_VERSION_MAJOR/MINOR/PATCH"
#endif
