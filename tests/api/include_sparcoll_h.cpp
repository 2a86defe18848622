// Compiles include/sparcoll/sparcoll.h on its own, as C++.
#include "sparcoll/sparcoll.h"
