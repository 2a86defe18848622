// Compiles include/sparcoll/types.hpp on its own (every public header must).
#include "sparcoll/types.hpp"
