// What the rdma driver offers beyond the Driver interface: hooks for its own tests.
#pragma once

#include "transport/driver.hpp"

namespace sparcoll::transport::rdma {

// Destroys every QP of `driver` (an rdma driver) without telling the peers, as a crash
// would; its peers must then report peer_failure naming it. No effect on other drivers.
void destroy_qps_abruptly(Driver& driver);

}  // namespace sparcoll::transport::rdma
