// Compiles include/sparcoll/version.hpp on its own (every public header must).
#include "sparcoll/version.hpp"
