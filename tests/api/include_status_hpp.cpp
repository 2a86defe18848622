// Compiles include/sparcoll/status.hpp on its own (every public header must).
#include "sparcoll/status.hpp"
