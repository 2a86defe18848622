// Which rdma device, port and GID the driver uses, and the opened device itself.
//
// Selection is split in two so it can be tested without hardware: list_devices() asks libibverbs
// what exists (devices, ports, GID tables with their types), choose_port() is a pure function
// over that inventory and the SPARCOLL_IB_* overrides. Automatic choice: among ACTIVE ports,
// the best-ranked GID wins (RoCE v2 IPv4-mapped, then other RoCE v2, then RoCE v2 link-local,
// then RoCE v1; InfiniBand ports use GID 0 and the LID), ties going to the first device/port.
// When nothing fits, the error lists every device, port (with its state) and GID found.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>
#include <vector>

#include "sparcoll/status.hpp"

namespace sparcoll::transport::rdma {

enum class GidType : std::uint8_t { ib, roce_v1, roce_v2 };

struct GidInfo {
  std::uint32_t index = 0;
  union ibv_gid gid {};
  GidType type = GidType::ib;
};

struct PortInfo {
  std::uint8_t number = 0;  // 1-based
  enum ibv_port_state state = IBV_PORT_NOP;
  std::uint8_t link_layer = IBV_LINK_LAYER_UNSPECIFIED;
  enum ibv_mtu active_mtu = IBV_MTU_1024;
  std::uint16_t lid = 0;
  std::vector<GidInfo> gids;  // valid entries only
};

struct DeviceInfo {
  std::string name;
  std::string error;  // why it could not be queried (then ports is empty)
  std::vector<PortInfo> ports;
};

// What the user asked for; empty / 0 / -1 mean "choose".
struct PortRequest {
  std::string device;
  std::uint32_t port = 0;
  int gid_index = -1;
};

struct PortChoice {
  std::string device;
  std::uint8_t port = 0;
  std::uint32_t gid_index = 0;
  union ibv_gid gid {};
  GidType gid_type = GidType::ib;
  bool ethernet = false;  // RoCE: every packet needs a GRH
  enum ibv_mtu mtu = IBV_MTU_1024;
  std::uint16_t lid = 0;
};

// Every device libibverbs reports, with its ports and GID tables. An empty list is not an
// error; failing to get the list at all is (e.g. no ib_uverbs in the kernel).
Status list_devices(std::vector<DeviceInfo>* out);
// Picks the device, port and GID to use (see the top of this file).
Status choose_port(const std::vector<DeviceInfo>& devices, const PortRequest& request, PortChoice* out);
// "fe80::1" / "::ffff:192.168.77.1".
std::string gid_text(const union ibv_gid& gid);
const char* gid_type_name(GidType type);
// True when at least one device has an ACTIVE port; else `reason` says what was found.
bool rdma_device_usable(std::string* reason);

// An opened device and its protection domain; closed in reverse order.
class Device {
 public:
  Device() = default;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  ~Device();

  Status open(const PortChoice& choice);
  ibv_context* context() const { return context_; }
  ibv_pd* pd() const { return pd_; }
  const ibv_device_attr& attr() const { return attr_; }
  const PortChoice& choice() const { return choice_; }

 private:
  ibv_context* context_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_device_attr attr_ {};
  PortChoice choice_;
};

}  // namespace sparcoll::transport::rdma
