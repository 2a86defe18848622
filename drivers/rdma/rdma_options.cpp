// The rdma driver's variables (common/config.hpp, DriverOptionTable): built whether or not the
// driver is (it needs rdma-core), so every build knows them.
#include "common/config_rows.hpp"

namespace sparcoll {
namespace {

using namespace config;

std::vector<ConfigVariable> variables() {
  return {
      {"SPARCOLL_IB_DEVICE", "ib_device", "(first device with an active port)",
       "rdma device the rdma transport uses, e.g. mlx5_0 or rxe0 (ibv_devices lists them).", {},
       &parse_text<&Options::ib_device>},
      {"SPARCOLL_IB_PORT", "ib_port", "(first active port)", "port of the rdma device, counted from 1.", {},
       &parse_positive_u32<&Options::ib_port>},
      {"SPARCOLL_IB_GID_INDEX", "ib_gid_index", "(best gid: RoCE v2, IPv4-mapped first)",
       "GID table index the rdma transport addresses its peers with (show_gids or ibv_devinfo -v lists them).", {},
       &parse_nonnegative_int<&Options::ib_gid_index>},
  };
}

}  // namespace

// No validate: every value the rows parse is valid; the device, port and GID are checked against
// the machine when the driver starts (rdma_device.cpp).
extern const DriverOptionTable rdma_option_table = {"rdma", &variables, nullptr};

}  // namespace sparcoll
