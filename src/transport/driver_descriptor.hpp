// What a driver says about itself: each driver folder defines one DriverDescriptor, and the
// build lists the folders that built (drivers/meson.build generates driver_list.cpp from that
// list). The registry (registry.cpp) knows drivers only through these.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sparcoll/status.hpp"
#include "transport/driver.hpp"

namespace sparcoll::transport {

// What the driver can do, whatever the machine: the contract tests hold each driver to it
// (tests/drivers/driver_conformance_test.cpp, "CapabilitiesMatchTheChannels").
struct DriverCapabilities {
  bool zero_copy = false;          // register_memory may succeed: sends read user memory in place
  bool events = false;             // channels give a wait_fd() to sleep on (SPARCOLL_POLL_MODE=event)
  bool reads_peer_memory = false;  // read_peer_memory works (the `direct` allreduce)
  bool recovers_loss = false;      // the driver itself resends lost frames (its medium drops them)
  // SPARCOLL_TRANSPORT=auto may pick it for a job across hosts: it needs no setting of its own
  // (dpdk needs its port and EAL arguments, so it stays a choice the user makes; shm serves one
  // host only, where auto always picks it).
  bool chosen_by_auto = false;
};

struct DriverDescriptor {
  const char* name = nullptr;  // SPARCOLL_TRANSPORT's value
  // Lower first when listing: the fastest transport first (rdma, dpdk, shm, tcp).
  std::uint32_t preference = 0;
  Status (*create)(const DriverContext& ctx, std::unique_ptr<Driver>* out) = nullptr;
  // Whether it can run on this machine now, else why not; null: wherever it builds.
  bool (*usable)(std::string* reason) = nullptr;
  DriverCapabilities capabilities;
};

// DriverDescriptor::create for a driver type with `Status setup(const DriverContext&)`.
template <typename D>
Status create_and_set_up(const DriverContext& ctx, std::unique_ptr<Driver>* out) {
  auto driver = std::make_unique<D>();
  Status status = driver->setup(ctx);
  if (!status.ok()) return status;
  *out = std::move(driver);
  return Status::Ok();
}

// The drivers built into this library, by preference (driver_list.cpp).
const std::vector<const DriverDescriptor*>& built_in_drivers();
// The descriptor of driver `name`, or null when it is not built.
const DriverDescriptor* find_driver(std::string_view name);

}  // namespace sparcoll::transport
