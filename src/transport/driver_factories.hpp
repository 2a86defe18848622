// One factory per built-in driver, called by create_driver (registry.cpp) after the context
// has been checked. Each is defined in drivers/<name>/ and only exists when that driver builds
// (SPARCOLL_DRIVER_<NAME> is then defined for the whole project by drivers/meson.build).
#pragma once

#include <memory>

#include "sparcoll/status.hpp"
#include "transport/driver.hpp"

namespace sparcoll::transport {

#ifdef SPARCOLL_DRIVER_SHM
Status create_shm_driver(const DriverContext& ctx, std::unique_ptr<Driver>* out);
#endif
#ifdef SPARCOLL_DRIVER_TCP
Status create_tcp_driver(const DriverContext& ctx, std::unique_ptr<Driver>* out);
#endif
#ifdef SPARCOLL_DRIVER_RDMA
Status create_rdma_driver(const DriverContext& ctx, std::unique_ptr<Driver>* out);
bool rdma_driver_usable(std::string* reason);
#endif
#ifdef SPARCOLL_DRIVER_DPDK
Status create_dpdk_driver(const DriverContext& ctx, std::unique_ptr<Driver>* out);
bool dpdk_driver_usable(std::string* reason);
#endif

}  // namespace sparcoll::transport
