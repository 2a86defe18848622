// The dpdk driver's frame format and EAL argument merging, without starting DPDK: checksums
// against known values, a round trip through the parser, and one rejection per field.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "../../drivers/dpdk/dpdk_eal.hpp"
#include "../../drivers/dpdk/dpdk_wire.hpp"

namespace sparcoll::test {
namespace {

using namespace transport::dpdk;

FrameHeader sample_header(std::uint32_t payload_len) {
  FrameHeader h;
  parse_mac("02:53:43:00:00:02", &h.dst_mac);
  parse_mac("02:53:43:00:00:01", &h.src_mac);
  parse_ipv4("10.0.0.2", &h.src_ip);
  parse_ipv4("10.0.0.3", &h.dst_ip);
  h.src_port = 47001;
  h.dst_port = 47001;
  h.type = FrameType::data;
  h.channel = 1;
  h.job_id = 0x1122334455667788ull;
  h.src = 1;
  h.dst = 2;
  h.seq = 77;
  h.ack = 5;
  h.sack = 0x5;
  h.limit = 300;
  h.payload_len = payload_len;
  return h;
}

RxExpect expect_for(const FrameHeader& h) {
  RxExpect e;
  e.mac = h.dst_mac;
  e.ip = h.dst_ip;
  e.udp_port = h.dst_port;
  e.channel = h.channel;
  e.self = h.dst;
  e.max_payload = 4096;
  return e;
}

TEST(DpdkWire, Ipv4ChecksumOfAKnownHeader) {
  // The classic example header (checksum 0xb861).
  const std::uint8_t ip[20] = {0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
                               0xb8, 0x61, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7};
  EXPECT_EQ(ipv4_checksum(ip), 0xb861);
}

TEST(DpdkWire, UdpChecksumSumsToAllOnes) {
  // Odd payload length exercises the padding byte.
  std::vector<std::uint8_t> payload(333);
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<std::uint8_t>(i * 7 + 3);
  const FrameHeader h = sample_header(static_cast<std::uint32_t>(payload.size()));
  std::vector<std::uint8_t> frame(kHeadersLen + payload.size());
  build_frame(frame.data(), h, payload.data(), true);
  // Pseudo-header + UDP header + payload, checksum included, must sum to 0xffff.
  std::uint32_t sum = 0;
  auto add = [&](const std::uint8_t* p, std::size_t len) {
    for (std::size_t i = 0; i < len; i += 2) sum += (std::uint32_t{p[i]} << 8) | (i + 1 < len ? p[i + 1] : 0);
  };
  add(frame.data() + 26, 8);
  sum += 17;
  const std::size_t udp_len = 8 + kTransportLen + payload.size();
  sum += static_cast<std::uint32_t>(udp_len);
  add(frame.data() + kUdpOffset, udp_len);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  EXPECT_EQ(sum, 0xffffu);
  EXPECT_NE(frame[kUdpOffset + 6] | frame[kUdpOffset + 7], 0) << "a computed checksum is never sent as 0";
}

TEST(DpdkWire, RoundTrip) {
  const char payload[] = "sparse blocks";
  const FrameHeader h = sample_header(sizeof payload);
  std::vector<std::uint8_t> frame(kHeadersLen + sizeof payload);
  for (bool udp_checksum : {false, true}) {
    ASSERT_EQ(build_frame(frame.data(), h, payload, udp_checksum), frame.size());
    FrameHeader got;
    ASSERT_EQ(parse_frame(frame.data(), frame.size(), expect_for(h), false, false, &got), Verdict::ok);
    EXPECT_EQ(got.src_mac, h.src_mac);
    EXPECT_EQ(got.src_ip, h.src_ip);
    EXPECT_EQ(got.src_port, h.src_port);
    EXPECT_EQ(got.type, FrameType::data);
    EXPECT_EQ(got.job_id, h.job_id);
    EXPECT_EQ(got.src, 1u);
    EXPECT_EQ(got.seq, 77u);
    EXPECT_EQ(got.ack, 5u);
    EXPECT_EQ(got.sack, 0x5u);
    EXPECT_EQ(got.limit, 300u);
    EXPECT_EQ(got.payload_len, sizeof payload);
    EXPECT_EQ(std::memcmp(frame.data() + kHeadersLen, payload, sizeof payload), 0);
  }
  // Ethernet padding after the IP packet is allowed.
  frame.resize(frame.size() + 10, 0);
  FrameHeader got;
  EXPECT_EQ(parse_frame(frame.data(), frame.size(), expect_for(h), false, false, &got), Verdict::ok);
}

TEST(DpdkWire, EveryFieldIsChecked) {
  const FrameHeader h = sample_header(16);
  const std::uint8_t payload[16] = {};
  std::vector<std::uint8_t> good(kHeadersLen + 16);
  build_frame(good.data(), h, payload, true);
  struct Case {
    const char* what;
    void (*mutate)(std::vector<std::uint8_t>&);
    Verdict want;
  };
  const Case cases[] = {
      {"truncated", [](std::vector<std::uint8_t>& f) { f.resize(60); }, Verdict::truncated},
      {"wrong mac", [](std::vector<std::uint8_t>& f) { f[5] ^= 1; }, Verdict::wrong_mac},
      {"ethertype", [](std::vector<std::uint8_t>& f) { f[12] = 0x86; f[13] = 0xdd; }, Verdict::not_ipv4},
      {"ip options", [](std::vector<std::uint8_t>& f) { f[14] = 0x46; }, Verdict::not_ipv4},
      {"fragment", [](std::vector<std::uint8_t>& f) { f[20] = 0x20; }, Verdict::ip_fragment},
      {"tcp", [](std::vector<std::uint8_t>& f) { f[23] = 6; }, Verdict::not_udp},
      {"ip length beyond frame", [](std::vector<std::uint8_t>& f) { f[16] = 0x10; }, Verdict::bad_ip_length},
      {"ip length below headers", [](std::vector<std::uint8_t>& f) { f[16] = 0; f[17] = 40; }, Verdict::bad_ip_length},
      {"ip checksum", [](std::vector<std::uint8_t>& f) { f[24] ^= 0xff; }, Verdict::bad_ip_checksum},
      {"udp length", [](std::vector<std::uint8_t>& f) { f[39] ^= 4; }, Verdict::bad_udp_length},
      {"udp port", [](std::vector<std::uint8_t>& f) { f[37] ^= 1; }, Verdict::wrong_udp_port},
      {"udp checksum", [](std::vector<std::uint8_t>& f) { f[40] ^= 0x10; }, Verdict::bad_udp_checksum},
      {"payload corrupted under udp checksum", [](std::vector<std::uint8_t>& f) { f[kHeadersLen + 3] ^= 1; },
       Verdict::bad_udp_checksum},
      {"magic", [](std::vector<std::uint8_t>& f) { f[field::magic] ^= 1; }, Verdict::bad_magic},
      {"version", [](std::vector<std::uint8_t>& f) { f[field::version] = 2; }, Verdict::bad_version},
      {"type 0", [](std::vector<std::uint8_t>& f) { f[field::type] = 0; }, Verdict::bad_type},
      {"type 5", [](std::vector<std::uint8_t>& f) { f[field::type] = 5; }, Verdict::bad_type},
      {"reserved", [](std::vector<std::uint8_t>& f) { f[field::reserved] = 1; }, Verdict::bad_reserved},
      {"channel", [](std::vector<std::uint8_t>& f) { f[field::channel] = 0; }, Verdict::wrong_channel},
      {"dst", [](std::vector<std::uint8_t>& f) { f[field::dst] = 9; }, Verdict::wrong_dst},
      {"payload length", [](std::vector<std::uint8_t>& f) { f[field::payload_len] = 15; }, Verdict::bad_payload_length},
  };
  for (const Case& c : cases) {
    std::vector<std::uint8_t> frame = good;
    c.mutate(frame);
    // Keep the udp checksum out of the way for header lies it would otherwise catch first.
    const bool keep_udp_checksum = c.want == Verdict::bad_udp_checksum;
    if (!keep_udp_checksum && frame.size() >= kHeadersLen) frame[kUdpOffset + 6] = frame[kUdpOffset + 7] = 0;
    FrameHeader got;
    EXPECT_EQ(parse_frame(frame.data(), frame.size(), expect_for(h), false, false, &got), c.want)
        << c.what << ": got " << verdict_name(parse_frame(frame.data(), frame.size(), expect_for(h), false, false, &got));
  }
  // A control frame carries no payload; data above the limit is refused.
  std::vector<std::uint8_t> frame = good;
  frame[field::type] = static_cast<std::uint8_t>(FrameType::ack);
  frame[kUdpOffset + 6] = frame[kUdpOffset + 7] = 0;
  FrameHeader got;
  EXPECT_EQ(parse_frame(frame.data(), frame.size(), expect_for(h), false, false, &got), Verdict::bad_payload_length);
  RxExpect small = expect_for(h);
  small.max_payload = 15;
  EXPECT_EQ(parse_frame(good.data(), good.size(), small, false, false, &got), Verdict::bad_payload_length);
  // Offloaded checksums are trusted.
  frame = good;
  frame[24] ^= 0xff;
  EXPECT_EQ(parse_frame(frame.data(), frame.size(), expect_for(h), true, false, &got), Verdict::ok);
}

// Found by tests/fuzz/fuzz_dpdk_wire (corpus: crash-mac-text-*, crash-ipv4-text-after-nul):
// peers publish their addresses as text; sscanf and inet_pton read a C string, so text after
// a NUL was ignored, and sscanf's %x took signs and blanks ("-1" as ff).
TEST(DpdkWire, AddressTextIsExact) {
  MacAddr mac;
  EXPECT_TRUE(parse_mac("02:53:43:00:00:01", &mac));
  EXPECT_EQ(mac_text(mac), "02:53:43:00:00:01");
  EXPECT_TRUE(parse_mac("2:A:b:0:00:ff", &mac));
  EXPECT_EQ(mac_text(mac), "02:0a:0b:00:00:ff");
  for (const std::string& bad : {std::string("02:53:43:00:00:01\0junk", 22), std::string("-1:02:03:04:05:06"),
                                std::string("+1:02:03:04:05:06"), std::string(" 1:02:03:04:05:06"),
                                std::string("01:02:03:04:05:06 "), std::string("001:02:03:04:05:06"),
                                std::string("01:02:03:04:05"), std::string("01:02:03:04:05:06:07"),
                                std::string("0x:02:03:04:05:06"), std::string("")}) {
    MacAddr untouched = mac;
    EXPECT_FALSE(parse_mac(bad, &untouched)) << "\"" << bad << "\"";
    EXPECT_EQ(untouched, mac);
  }
  std::uint32_t ip = 0;
  EXPECT_TRUE(parse_ipv4("10.0.0.2", &ip));
  EXPECT_EQ(ip, 0x0a000002u);
  for (const std::string& bad : {std::string("90.0.0.0\0\x01", 10), std::string("10.0.0.2 "), std::string("10.0.0"),
                                std::string("010.0.0.2"), std::string("256.0.0.1")})
    EXPECT_FALSE(parse_ipv4(bad, &ip)) << "\"" << bad << "\"";
}

TEST(DpdkEalArguments, DefaultsAndReplacements) {
  auto has = [](const std::vector<std::string>& args, const std::string& word) {
    for (const std::string& a : args)
      if (a == word) return true;
    return false;
  };
  const auto defaults = eal_arguments("");
  EXPECT_EQ(join_args(defaults),
            "sparcoll --no-huge --single-file-segments -m 1024 --no-pci --no-shconf --no-telemetry --log-level=lib.eal:error "
            "--log-level=pmd.*:error -l 0");
  EXPECT_FALSE(eal_arguments_name_a_device(defaults));

  const auto pci = eal_arguments("-a 0000:00:08.0 -l 2,3");
  EXPECT_FALSE(has(pci, "--no-pci"));
  EXPECT_FALSE(has(pci, "0")) << join_args(pci);
  EXPECT_TRUE(has(pci, "0000:00:08.0"));
  EXPECT_TRUE(eal_arguments_name_a_device(pci));

  const auto vdev = eal_arguments("  --vdev=net_af_packet0,iface=veth0\t--socket-mem=256 ");
  EXPECT_TRUE(has(vdev, "--no-pci")) << "a vdev keeps the PCI bus off";
  EXPECT_FALSE(has(vdev, "--no-huge"));
  EXPECT_FALSE(has(vdev, "--single-file-segments")) << "hugepage layout stays the user's";
  EXPECT_FALSE(has(vdev, "-m"));
  EXPECT_TRUE(eal_arguments_name_a_device(vdev));
  EXPECT_EQ(vdev.back(), "--socket-mem=256");

  const auto lcores = eal_arguments("--lcores=1 -m 2048 --log-level=pmd.*:debug");
  EXPECT_FALSE(has(lcores, "-l"));
  EXPECT_TRUE(has(lcores, "2048"));
  EXPECT_FALSE(has(lcores, "1024"));
  EXPECT_EQ(lcores.back(), "--log-level=pmd.*:debug") << "the user's log level comes last and wins";

  // A user's own --no-huge keeps the single file (memif zero-copy shares it); --legacy-mem drops it.
  EXPECT_TRUE(has(eal_arguments("--no-huge"), "--single-file-segments"));
  EXPECT_FALSE(has(eal_arguments("--no-huge --legacy-mem"), "--single-file-segments"));
}

}  // namespace
}  // namespace sparcoll::test
