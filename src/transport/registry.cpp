// create_driver / available_drivers: the only place that knows which drivers exist.
#include <string>
#include <vector>

#include "transport/driver.hpp"
#include "transport/driver_factories.hpp"
#include "transport/setup_util.hpp"

namespace sparcoll::transport {
namespace {

using Factory = Status (*)(const DriverContext&, std::unique_ptr<Driver>*);
using Probe = bool (*)(std::string* reason);

struct Entry {
  const char* name;
  Factory create;
  Probe usable = nullptr;  // nullptr: usable wherever it builds
};

// In order of preference for "auto" selection by the caller: fastest first.
const Entry kDrivers[] = {
#ifdef SPARCOLL_DRIVER_RDMA
    {"rdma", &create_rdma_driver, &rdma_driver_usable},
#endif
#ifdef SPARCOLL_DRIVER_DPDK
    {"dpdk", &create_dpdk_driver, &dpdk_driver_usable},
#endif
#ifdef SPARCOLL_DRIVER_SHM
    {"shm", &create_shm_driver},
#endif
#ifdef SPARCOLL_DRIVER_TCP
    {"tcp", &create_tcp_driver},
#endif
    {nullptr, nullptr, nullptr},
};

}  // namespace

std::vector<std::string> available_drivers() {
  std::vector<std::string> names;
  for (const Entry* entry = kDrivers; entry->name != nullptr; ++entry) names.emplace_back(entry->name);
  return names;
}

bool driver_usable(std::string_view name, std::string* reason) {
  for (const Entry* entry = kDrivers; entry->name != nullptr; ++entry) {
    if (name != entry->name) continue;
    return entry->usable == nullptr || entry->usable(reason);
  }
  if (reason != nullptr) *reason = "transport '" + std::string(name) + "' is not built into this library";
  return false;
}

Status create_driver(std::string_view name, const DriverContext& ctx, std::unique_ptr<Driver>* out) {
  for (const Entry* entry = kDrivers; entry->name != nullptr; ++entry) {
    if (name != entry->name) continue;
    Status status = check_context(ctx);
    if (!status.ok()) return status;
    std::unique_ptr<Driver> driver;
    status = entry->create(ctx, &driver);
    if (!status.ok()) return status;
    *out = std::move(driver);
    return Status::Ok();
  }
  std::string known;
  for (const std::string& available : available_drivers()) known += (known.empty() ? "" : ", ") + available;
  return Status(ErrorCode::unsupported, "transport '" + std::string(name) + "' is not built into this library (available: " +
                                            (known.empty() ? "none" : known) + ")");
}

}  // namespace sparcoll::transport
