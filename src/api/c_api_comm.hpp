// The C handles' structs, shared by the C API's files (c_api.cpp, c_api_collectives.cpp).
#pragma once

#include "sparcoll/communicator.hpp"
#include "sparcoll/sparcoll.h"

struct sparcoll_comm {
  sparcoll::Communicator comm;
};
