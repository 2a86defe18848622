#include "rdma_device.hpp"

#include <arpa/inet.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "transport/setup_util.hpp"

namespace sparcoll::transport::rdma {
namespace {

struct DeviceListDeleter {
  void operator()(ibv_device** list) const { ibv_free_device_list(list); }
};
using DeviceList = std::unique_ptr<ibv_device*[], DeviceListDeleter>;

struct ContextCloser {
  void operator()(ibv_context* context) const { ibv_close_device(context); }
};
using ContextHandle = std::unique_ptr<ibv_context, ContextCloser>;

GidType gid_type_of(std::uint32_t type) {
  switch (type) {
    case IBV_GID_TYPE_ROCE_V2: return GidType::roce_v2;
    case IBV_GID_TYPE_ROCE_V1: return GidType::roce_v1;
    default: return GidType::ib;
  }
}

bool is_ipv4_mapped(const union ibv_gid& gid) {
  static const std::uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(gid.raw, prefix, sizeof prefix) == 0;
}

bool is_link_local(const union ibv_gid& gid) { return gid.raw[0] == 0xfe && (gid.raw[1] & 0xc0) == 0x80; }

// Lower is better; -1: not usable automatically on this port.
int gid_rank(const PortInfo& port, const GidInfo& gid) {
  if (port.link_layer != IBV_LINK_LAYER_ETHERNET) return gid.index == 0 ? 0 : -1;  // IB: GID 0 + LID
  if (gid.type == GidType::roce_v2) {
    if (is_ipv4_mapped(gid.gid)) return 0;  // routable, the address the interface has
    return is_link_local(gid.gid) ? 2 : 1;
  }
  return gid.type == GidType::roce_v1 ? 3 : -1;
}

const char* port_state_name(enum ibv_port_state state) { return ibv_port_state_str(state); }

// "rxe0 port 1 (PORT_ACTIVE, ethernet): gid 0 fe80::1 RoCE v2, gid 1 ::ffff:10.0.0.1 RoCE v2"
std::string describe(const std::vector<DeviceInfo>& devices) {
  if (devices.empty()) return "no rdma devices found";
  std::string text;
  for (const DeviceInfo& device : devices) {
    if (!text.empty()) text += "; ";
    if (!device.error.empty()) {
      text += device.name + " (" + device.error + ")";
      continue;
    }
    if (device.ports.empty()) text += device.name + " (no ports)";
    for (std::size_t p = 0; p < device.ports.size(); ++p) {
      const PortInfo& port = device.ports[p];
      if (p > 0) text += "; ";
      text += device.name + " port " + std::to_string(port.number) + " (" + port_state_name(port.state) + ", " +
              (port.link_layer == IBV_LINK_LAYER_ETHERNET ? "ethernet" : "infiniband") + ")";
      if (port.gids.empty()) text += ": no gids";
      for (std::size_t g = 0; g < port.gids.size(); ++g) {
        const GidInfo& gid = port.gids[g];
        text += (g == 0 ? ": gid " : ", gid ") + std::to_string(gid.index) + " " + gid_text(gid.gid) + " " +
                gid_type_name(gid.type);
      }
    }
  }
  return "found: " + text;
}

PortChoice make_choice(const DeviceInfo& device, const PortInfo& port, const GidInfo& gid) {
  PortChoice choice;
  choice.device = device.name;
  choice.port = port.number;
  choice.gid_index = gid.index;
  choice.gid = gid.gid;
  choice.gid_type = gid.type;
  choice.ethernet = port.link_layer == IBV_LINK_LAYER_ETHERNET;
  choice.mtu = port.active_mtu;
  choice.lid = port.lid;
  return choice;
}

Status query_port(ibv_context* context, std::uint8_t number, PortInfo* out, std::uint32_t* gid_table_len) {
  ibv_port_attr attr {};
  if (int err = ibv_query_port(context, number, &attr); err != 0)
    return Status(ErrorCode::system_error, "ibv_query_port failed: " + errno_text(err));
  out->number = number;
  out->state = attr.state;
  out->link_layer = attr.link_layer;
  out->active_mtu = attr.active_mtu;
  out->lid = attr.lid;
  *gid_table_len = static_cast<std::uint32_t>(attr.gid_tbl_len);
  return Status::Ok();
}

// Fills the GIDs of every port: one ibv_query_gid_table call (valid entries only, with their
// types), else entry by entry (kernels without the ioctl; rxe's table has 1024 entries).
void query_gids(ibv_context* context, std::uint32_t total_entries, std::vector<PortInfo>* ports) {
  static const union ibv_gid zero {};
  std::vector<ibv_gid_entry> entries(total_entries);
  const ssize_t n = total_entries == 0 ? 0 : ibv_query_gid_table(context, entries.data(), entries.size(), 0);
  if (n >= 0) {
    for (ssize_t i = 0; i < n; ++i) {
      const ibv_gid_entry& entry = entries[static_cast<std::size_t>(i)];
      if (entry.port_num == 0 || entry.port_num > ports->size()) continue;
      if (std::memcmp(&entry.gid, &zero, sizeof zero) == 0) continue;
      (*ports)[entry.port_num - 1].gids.push_back(GidInfo{entry.gid_index, entry.gid, gid_type_of(entry.gid_type)});
    }
    return;
  }
  for (PortInfo& port : *ports) {
    if (port.state != IBV_PORT_ACTIVE) continue;
    for (std::uint32_t index = 0; index < 256; ++index) {
      ibv_gid_entry entry {};
      if (ibv_query_gid_ex(context, port.number, index, &entry, 0) != 0) continue;
      if (std::memcmp(&entry.gid, &zero, sizeof zero) == 0) continue;
      port.gids.push_back(GidInfo{index, entry.gid, gid_type_of(entry.gid_type)});
    }
  }
}

}  // namespace

std::string gid_text(const union ibv_gid& gid) {
  char buffer[INET6_ADDRSTRLEN] = {};
  if (inet_ntop(AF_INET6, gid.raw, buffer, sizeof buffer) == nullptr) return "?";
  return buffer;
}

const char* gid_type_name(GidType type) {
  switch (type) {
    case GidType::roce_v2: return "RoCE v2";
    case GidType::roce_v1: return "RoCE v1";
    case GidType::ib: return "IB";
  }
  return "?";
}

Status list_devices(std::vector<DeviceInfo>* out) {
  int count = 0;
  errno = 0;
  DeviceList list(ibv_get_device_list(&count));
  if (list == nullptr)
    return Status(ErrorCode::unsupported, "cannot list rdma devices: " + errno_text(errno != 0 ? errno : ENOSYS) +
                                              " (is the ib_uverbs kernel module loaded?)");
  std::vector<DeviceInfo> devices;
  for (int i = 0; i < count; ++i) {
    DeviceInfo info;
    info.name = ibv_get_device_name(list[i]);
    ContextHandle context(ibv_open_device(list[i]));
    if (context == nullptr) {
      info.error = "cannot open: " + errno_text(errno);
      devices.push_back(std::move(info));
      continue;
    }
    ibv_device_attr attr {};
    if (int err = ibv_query_device(context.get(), &attr); err != 0) {
      info.error = "ibv_query_device failed: " + errno_text(err);
      devices.push_back(std::move(info));
      continue;
    }
    std::uint32_t total_entries = 0;
    for (std::uint8_t number = 1; number <= attr.phys_port_cnt; ++number) {
      PortInfo port;
      std::uint32_t entries = 0;
      Status status = query_port(context.get(), number, &port, &entries);
      if (!status.ok()) {
        info.error = "port " + std::to_string(number) + ": " + status.message();
        break;
      }
      total_entries += entries;
      info.ports.push_back(std::move(port));
    }
    if (info.error.empty()) query_gids(context.get(), total_entries, &info.ports);
    devices.push_back(std::move(info));
  }
  *out = std::move(devices);
  return Status::Ok();
}

Status choose_port(const std::vector<DeviceInfo>& devices, const PortRequest& request, PortChoice* out) {
  const std::string wanted = (request.device.empty() ? std::string("any device") : "device " + request.device) +
                             (request.port == 0 ? "" : " port " + std::to_string(request.port)) +
                             (request.gid_index < 0 ? "" : " gid index " + std::to_string(request.gid_index));
  bool device_seen = request.device.empty();
  bool port_seen = request.port == 0;
  int best_rank = -1;
  PortChoice best;
  for (const DeviceInfo& device : devices) {
    if (!request.device.empty() && device.name != request.device) continue;
    device_seen = true;
    for (const PortInfo& port : device.ports) {
      if (request.port != 0 && port.number != request.port) continue;
      port_seen = true;
      if (port.state != IBV_PORT_ACTIVE) continue;
      for (const GidInfo& gid : port.gids) {
        if (request.gid_index >= 0) {
          // An explicit index is taken as given, whatever its type.
          if (gid.index != static_cast<std::uint32_t>(request.gid_index)) continue;
          *out = make_choice(device, port, gid);
          return Status::Ok();
        }
        const int rank = gid_rank(port, gid);
        if (rank < 0 || (best_rank >= 0 && rank >= best_rank)) continue;
        best_rank = rank;
        best = make_choice(device, port, gid);
      }
    }
  }
  if (best_rank >= 0) {
    *out = best;
    return Status::Ok();
  }
  std::string why;
  if (!device_seen)
    why = "no rdma device is named " + request.device + " (SPARCOLL_IB_DEVICE)";
  else if (!port_seen)
    why = "the device has no port " + std::to_string(request.port) + " (SPARCOLL_IB_PORT)";
  else if (request.gid_index >= 0)
    why = "no active port has a valid gid at index " + std::to_string(request.gid_index) + " (SPARCOLL_IB_GID_INDEX)";
  else
    why = "no active port with a usable gid";
  return Status(ErrorCode::unsupported, "rdma transport cannot use " + wanted + ": " + why + "; " + describe(devices));
}

bool rdma_device_usable(std::string* reason) {
  std::vector<DeviceInfo> devices;
  Status status = list_devices(&devices);
  if (status.ok()) {
    for (const DeviceInfo& device : devices)
      for (const PortInfo& port : device.ports)
        if (port.state == IBV_PORT_ACTIVE) return true;
    status = Status(ErrorCode::unsupported, "no rdma device with an active port; " + describe(devices));
  }
  if (reason != nullptr) *reason = status.message();
  return false;
}

Device::~Device() {
  if (pd_ != nullptr) ibv_dealloc_pd(pd_);
  if (context_ != nullptr) ibv_close_device(context_);
}

Status Device::open(const PortChoice& choice) {
  int count = 0;
  DeviceList list(ibv_get_device_list(&count));
  if (list == nullptr) return Status(ErrorCode::unsupported, "cannot list rdma devices: " + errno_text(errno));
  for (int i = 0; i < count && context_ == nullptr; ++i) {
    if (choice.device != ibv_get_device_name(list[i])) continue;
    context_ = ibv_open_device(list[i]);
    if (context_ == nullptr)
      return Status(ErrorCode::system_error, "cannot open rdma device " + choice.device + ": " + errno_text(errno));
  }
  if (context_ == nullptr) return Status(ErrorCode::unsupported, "rdma device " + choice.device + " disappeared");
  if (int err = ibv_query_device(context_, &attr_); err != 0)
    return Status(ErrorCode::system_error, "ibv_query_device on " + choice.device + " failed: " + errno_text(err));
  pd_ = ibv_alloc_pd(context_);
  if (pd_ == nullptr)
    return Status(ErrorCode::system_error, "ibv_alloc_pd on " + choice.device + " failed: " + errno_text(errno));
  choice_ = choice;
  return Status::Ok();
}

}  // namespace sparcoll::transport::rdma
