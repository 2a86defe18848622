// Compiles include/sparcoll/communicator.hpp on its own (every public header must).
#include "sparcoll/communicator.hpp"
