// Compiles include/sparcoll/sparcoll.hpp on its own (every public header must).
#include "sparcoll/sparcoll.hpp"
