#include "membership/auto_transport.hpp"

#include <sstream>

#include "transport/driver_descriptor.hpp"

namespace sparcoll::membership {
namespace {

bool listed(const std::string& list, const std::string& name) {
  std::istringstream in(list);
  for (std::string item; std::getline(in, item, ',');)
    if (item == name) return true;
  return false;
}

}  // namespace

std::string auto_candidates_here() {
  std::string out;
  for (const transport::DriverDescriptor* d : transport::built_in_drivers()) {
    std::string reason;
    if (!d->capabilities.chosen_by_auto || (d->usable != nullptr && !d->usable(&reason))) continue;
    if (!out.empty()) out += ',';
    out += d->name;
  }
  return out;
}

std::string choose_auto_transport(const std::vector<transport::ProcessInfo>& processes,
                                  const std::vector<std::string>& candidates, std::string* why) {
  bool one_host = true;
  for (const transport::ProcessInfo& p : processes)
    if (p.host != processes.front().host) one_host = false;
  if (one_host) {
    *why = "every process is on one host";
    return "shm";
  }
  for (const transport::DriverDescriptor* d : transport::built_in_drivers()) {
    if (!d->capabilities.chosen_by_auto) continue;
    bool everywhere = true;
    for (const std::string& c : candidates) everywhere = everywhere && listed(c, d->name);
    if (everywhere) {
      *why = "processes on several hosts; the most preferred transport every process can run";
      return d->name;
    }
  }
  *why = "processes on several hosts; no transport auto may choose is usable on every process";
  return "tcp";
}

}  // namespace sparcoll::membership
