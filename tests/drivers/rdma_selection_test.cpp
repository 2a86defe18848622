// rdma device/port/GID choice and the registration cache: pure logic, runs without a device.
#include <arpa/inet.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <vector>

#include "../../drivers/rdma/rdma_device.hpp"
#include "../../drivers/rdma/rdma_mr_cache.hpp"
#include "../../drivers/rdma/rdma_qp.hpp"

namespace sparcoll::test {
namespace {

using namespace transport::rdma;

GidInfo gid(std::uint32_t index, const char* text, GidType type) {
  GidInfo g;
  g.index = index;
  inet_pton(AF_INET6, text, g.gid.raw);
  g.type = type;
  return g;
}

PortInfo roce_port(std::uint8_t number, enum ibv_port_state state, std::vector<GidInfo> gids) {
  PortInfo p;
  p.number = number;
  p.state = state;
  p.link_layer = IBV_LINK_LAYER_ETHERNET;
  p.active_mtu = IBV_MTU_1024;
  p.gids = std::move(gids);
  return p;
}

std::vector<DeviceInfo> two_devices() {
  DeviceInfo down{"mlx5_0", "", {roce_port(1, IBV_PORT_DOWN, {})}};
  DeviceInfo rxe{"rxe0", "", {roce_port(1, IBV_PORT_ACTIVE, {gid(0, "fe80::1", GidType::roce_v2),
                                                             gid(1, "::ffff:192.168.77.1", GidType::roce_v2),
                                                             gid(2, "::ffff:192.168.77.1", GidType::roce_v1)})}};
  return {down, rxe};
}

TEST(DriverRdmaSelection, PrefersAnActivePortsIpv4MappedRoceV2Gid) {
  PortChoice choice;
  ASSERT_TRUE(choose_port(two_devices(), PortRequest{}, &choice).ok());
  EXPECT_EQ(choice.device, "rxe0");
  EXPECT_EQ(choice.port, 1);
  EXPECT_EQ(choice.gid_index, 1u);
  EXPECT_TRUE(choice.ethernet);
  EXPECT_EQ(choice.mtu, IBV_MTU_1024);
}

TEST(DriverRdmaSelection, AnExplicitGidIndexIsTakenAsGiven) {
  PortChoice choice;
  PortRequest request;
  request.gid_index = 2;
  ASSERT_TRUE(choose_port(two_devices(), request, &choice).ok());
  EXPECT_EQ(choice.gid_index, 2u);
  EXPECT_EQ(choice.gid_type, GidType::roce_v1);
}

TEST(DriverRdmaSelection, WrongGidIndexListsWhatExists) {
  PortChoice choice;
  PortRequest request;
  request.gid_index = 7;
  Status status = choose_port(two_devices(), request, &choice);
  EXPECT_EQ(status.code(), ErrorCode::unsupported);
  const std::string& m = status.message();
  EXPECT_NE(m.find("gid index 7"), std::string::npos) << m;
  EXPECT_NE(m.find("SPARCOLL_IB_GID_INDEX"), std::string::npos) << m;
  EXPECT_NE(m.find("mlx5_0 port 1 (down, ethernet)"), std::string::npos) << m;
  EXPECT_NE(m.find("gid 1 ::ffff:192.168.77.1 RoCE v2"), std::string::npos) << m;
}

TEST(DriverRdmaSelection, UnknownDeviceAndPortAreNamed) {
  PortChoice choice;
  PortRequest request;
  request.device = "mlx5_9";
  Status status = choose_port(two_devices(), request, &choice);
  EXPECT_NE(status.message().find("no rdma device is named mlx5_9 (SPARCOLL_IB_DEVICE)"), std::string::npos)
      << status.message();
  request.device = "rxe0";
  request.port = 2;
  status = choose_port(two_devices(), request, &choice);
  EXPECT_NE(status.message().find("no port 2 (SPARCOLL_IB_PORT)"), std::string::npos) << status.message();
}

TEST(DriverRdmaSelection, NoDevicesSaysSo) {
  PortChoice choice;
  Status status = choose_port({}, PortRequest{}, &choice);
  EXPECT_EQ(status.code(), ErrorCode::unsupported);
  EXPECT_NE(status.message().find("no rdma devices found"), std::string::npos) << status.message();
}

TEST(DriverRdmaSelection, InfinibandPortsUseGidZero) {
  PortInfo ib;
  ib.number = 1;
  ib.state = IBV_PORT_ACTIVE;
  ib.link_layer = IBV_LINK_LAYER_INFINIBAND;
  ib.lid = 7;
  ib.gids = {gid(0, "fe80::2", GidType::ib)};
  PortChoice choice;
  ASSERT_TRUE(choose_port({DeviceInfo{"mlx5_1", "", {ib}}}, PortRequest{}, &choice).ok());
  EXPECT_FALSE(choice.ethernet);
  EXPECT_EQ(choice.lid, 7);
  EXPECT_EQ(choice.gid_index, 0u);
}

TEST(DriverRdmaSelection, EndpointRoundTripsAndRejectsGarbage) {
  Endpoint e;
  e.qpn = 0x1a2b;
  e.psn = 0xabcdef;
  e.lid = 3;
  inet_pton(AF_INET6, "::ffff:10.1.2.3", e.gid.raw);
  e.mtu = IBV_MTU_4096;
  e.ring_addr = 0x7f0000001000;
  e.ring_rkey = 0x99;
  e.slots = 64;
  e.slot_bytes = 4096;
  e.credit_addr = 0x7f0000002000;
  e.credit_rkey = 0x98;
  Endpoint back;
  ASSERT_TRUE(decode_endpoint(encode_endpoint(e), &back));
  EXPECT_EQ(encode_endpoint(back), encode_endpoint(e));
  EXPECT_FALSE(decode_endpoint("qpn=1", &back));
  EXPECT_FALSE(decode_endpoint(encode_endpoint(e) + " extra=1", &back));
  EXPECT_FALSE(decode_endpoint("qpn=zz", &back));
}

// A registrar that hands out fake keys and counts calls, so the cache runs without a device.
struct FakeRegistrar {
  int regs = 0;
  int deregs = 0;
  int fail_with = 0;
  MrCache::Registrar make() {
    MrCache::Registrar r;
    r.reg = [this](void*, std::size_t, int, MemoryKeys* keys) -> void* {
      if (fail_with != 0) {
        errno = fail_with;
        return nullptr;
      }
      ++regs;
      keys->lkey = keys->rkey = static_cast<std::uint32_t>(regs);
      return reinterpret_cast<void*>(static_cast<std::uintptr_t>(regs));
    };
    r.dereg = [this](void*) {
      ++deregs;
      return 0;
    };
    return r;
  }
};

TEST(DriverRdmaMrCache, ReusesCoveringRegionsAndEvicts) {
  FakeRegistrar fake;
  std::vector<std::byte> buffer(1 << 16);
  {
    MrCache cache(fake.make());
    MemoryKeys a, b, c;
    ASSERT_TRUE(cache.get(buffer.data(), buffer.size(), 1, "ring", &a).ok());
    ASSERT_TRUE(cache.get(buffer.data() + 100, 1000, 1, "ring", &b).ok());  // inside: reused
    EXPECT_EQ(a.lkey, b.lkey);
    EXPECT_EQ(fake.regs, 1);
    ASSERT_TRUE(cache.get(buffer.data() + 100, 1000, 3, "ring", &c).ok());  // more access: new region
    EXPECT_EQ(fake.regs, 2);
    EXPECT_EQ(cache.size(), 2u);
    cache.evict(buffer.data() + 150, 10);  // overlaps both
    EXPECT_EQ(cache.size(), 0u);
    EXPECT_EQ(fake.deregs, 2);
    ASSERT_TRUE(cache.get(buffer.data(), 10, 1, "ring", &a).ok());
  }
  EXPECT_EQ(fake.deregs, 3) << "the destructor deregisters what is left";
}

TEST(DriverRdmaMrCache, LockedMemoryFailureGivesTheUlimitHint) {
  FakeRegistrar fake;
  fake.fail_with = ENOMEM;
  MrCache cache(fake.make());
  std::vector<std::byte> buffer(4096);
  MemoryKeys keys;
  Status status = cache.get(buffer.data(), buffer.size(), 1, "receive rings of rdma channel 0", &keys);
  EXPECT_EQ(status.code(), ErrorCode::no_resource);
  EXPECT_NE(status.message().find("receive rings of rdma channel 0"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("ulimit -l"), std::string::npos) << status.message();
}

}  // namespace
}  // namespace sparcoll::test
