// create_driver / available_drivers / driver_usable over the built-in drivers' descriptors
// (driver_descriptor.hpp): nothing here names a driver.
#include <algorithm>
#include <string>
#include <vector>

#include "transport/driver.hpp"
#include "transport/driver_descriptor.hpp"
#include "transport/setup_util.hpp"

namespace sparcoll::transport {

// The generated list (driver_list.cpp), in build order.
extern const DriverDescriptor* const kBuiltInDrivers[];

const std::vector<const DriverDescriptor*>& built_in_drivers() {
  static const std::vector<const DriverDescriptor*> sorted = [] {
    std::vector<const DriverDescriptor*> v;
    for (const DriverDescriptor* const* d = kBuiltInDrivers; *d != nullptr; ++d) v.push_back(*d);
    std::stable_sort(v.begin(), v.end(),
                     [](const DriverDescriptor* a, const DriverDescriptor* b) { return a->preference < b->preference; });
    return v;
  }();
  return sorted;
}

const DriverDescriptor* find_driver(std::string_view name) {
  for (const DriverDescriptor* d : built_in_drivers())
    if (name == d->name) return d;
  return nullptr;
}

std::vector<std::string> available_drivers() {
  std::vector<std::string> names;
  for (const DriverDescriptor* d : built_in_drivers()) names.emplace_back(d->name);
  return names;
}

bool driver_usable(std::string_view name, std::string* reason) {
  if (const DriverDescriptor* d = find_driver(name)) return d->usable == nullptr || d->usable(reason);
  if (reason != nullptr) *reason = "transport '" + std::string(name) + "' is not built into this library";
  return false;
}

Status create_driver(std::string_view name, const DriverContext& ctx, std::unique_ptr<Driver>* out) {
  if (const DriverDescriptor* d = find_driver(name)) {
    Status status = check_context(ctx);
    if (!status.ok()) return status;
    std::unique_ptr<Driver> driver;
    status = d->create(ctx, &driver);
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
