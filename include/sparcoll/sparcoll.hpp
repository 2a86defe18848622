// Umbrella header of the C++ API.
#pragma once

#include "sparcoll/communicator.hpp"
#include "sparcoll/options.hpp"
#include "sparcoll/status.hpp"
#include "sparcoll/types.hpp"
#include "sparcoll/version.hpp"
