// Compiles include/sparcoll/options.hpp on its own (every public header must).
#include "sparcoll/options.hpp"
