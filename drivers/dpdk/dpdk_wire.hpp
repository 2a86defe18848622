// The dpdk driver's frame: Ethernet II + IPv4 (no options) + UDP + the sparcoll transport
// header, then the engine's message as opaque payload. This file has no DPDK types, so tests
// can build (and break) frames with it. Layout, offsets from the start of the frame:
//
//   0  Ethernet: dst mac 6, src mac 6, ethertype 0x0800
//  14  IPv4: 0x45, tos 0, total length, id 0, flags DF, ttl 64, proto 17, checksum, src, dst
//  34  UDP: src port, dst port, length, checksum (0 = none, else verified)
//  42  transport (little-endian): magic u16 "SD", version u8, type u8, channel u16, job id u64,
//      src u32, dst u32, seq u64, ack u64, sack u64, limit u64, payload length u32, reserved u32
// 104  payload (8-byte aligned when the frame starts 8-byte aligned, as mbuf data does)
//
// Network byte order for Ethernet/IP/UDP, little-endian for the transport header (like the
// engine's WireHeader). docs/dpdk.md has the byte table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace sparcoll::transport::dpdk {

inline constexpr std::size_t kEthLen = 14;
inline constexpr std::size_t kIpLen = 20;
inline constexpr std::size_t kUdpLen = 8;
inline constexpr std::size_t kIpOffset = kEthLen;
inline constexpr std::size_t kUdpOffset = kEthLen + kIpLen;
inline constexpr std::size_t kTransportOffset = kEthLen + kIpLen + kUdpLen;  // 42
inline constexpr std::size_t kTransportLen = 62;
inline constexpr std::size_t kHeadersLen = kTransportOffset + kTransportLen;  // 104
static_assert(kHeadersLen % 8 == 0, "the payload must start 8-byte aligned");

inline constexpr std::uint16_t kMagic = 0x4453;  // bytes 'S' 'D'
inline constexpr std::uint8_t kVersion = 1;
inline constexpr std::uint16_t kEtherTypeIpv4 = 0x0800;
inline constexpr std::uint8_t kIpProtoUdp = 17;

// Transport header field offsets, from the start of the frame.
namespace field {
inline constexpr std::size_t magic = 42;
inline constexpr std::size_t version = 44;
inline constexpr std::size_t type = 45;
inline constexpr std::size_t channel = 46;
inline constexpr std::size_t job_id = 48;
inline constexpr std::size_t src = 56;
inline constexpr std::size_t dst = 60;
inline constexpr std::size_t seq = 64;
inline constexpr std::size_t ack = 72;
inline constexpr std::size_t sack = 80;
inline constexpr std::size_t limit = 88;
inline constexpr std::size_t payload_len = 96;
inline constexpr std::size_t reserved = 100;
}  // namespace field

// DATA carries one engine message; ACK only the acknowledgement fields; FIN says "I am closing,
// I sent `seq` data messages"; FIN_ACK says "I got your FIN and will not touch our link again".
enum class FrameType : std::uint8_t { data = 1, ack = 2, fin = 3, fin_ack = 4 };

struct MacAddr {
  std::uint8_t bytes[6] = {};
  bool operator==(const MacAddr&) const = default;
};

// Everything in the headers. IP addresses and ports in host byte order.
struct FrameHeader {
  MacAddr dst_mac;
  MacAddr src_mac;
  std::uint32_t src_ip = 0;
  std::uint32_t dst_ip = 0;
  std::uint16_t src_port = 0;
  std::uint16_t dst_port = 0;
  FrameType type = FrameType::data;
  std::uint16_t channel = 0;
  std::uint64_t job_id = 0;
  std::uint32_t src = 0;
  std::uint32_t dst = 0;
  std::uint64_t seq = 0;    // DATA: its sequence number; FIN: data messages sent
  std::uint64_t ack = 0;    // every seq below it arrived at the sender of this frame
  std::uint64_t sack = 0;   // bit i: seq ack + 1 + i arrived too
  std::uint64_t limit = 0;  // the receiver has room for every seq below it
  std::uint32_t payload_len = 0;
};

// Writes the kHeadersLen bytes of headers for `h` (payload_len included) at `out`. The IPv4
// checksum is computed unless `ip_checksum` is false (the NIC fills it); the UDP checksum is 0.
void write_headers(std::uint8_t* out, const FrameHeader& h, bool ip_checksum);
// The IPv4 header checksum of the 20 bytes at `ip` (with its checksum field taken as 0).
std::uint16_t ipv4_checksum(const std::uint8_t* ip);
// The UDP checksum of a complete frame (pseudo-header, UDP header and payload, checksum field
// taken as 0), never 0 (0 means "no checksum" on the wire). Lengths come from the UDP header,
// which the caller has checked against the frame.
std::uint16_t udp_checksum(const std::uint8_t* frame);
// The IPv4 pseudo-header sum alone, folded but not inverted: what a NIC offloading the UDP
// checksum expects in the checksum field.
std::uint16_t udp_pseudo_header_sum(const std::uint8_t* frame);
// Writes a whole frame (headers, payload, both checksums) into out[0..kHeadersLen + len);
// for tests and tools.
std::size_t build_frame(std::uint8_t* out, const FrameHeader& h, const void* payload, bool with_udp_checksum);

// Why a frame was rejected. Every value but `ok` counts in dropped_invalid.
enum class Verdict : std::uint8_t {
  ok,
  truncated,            // shorter than the headers, or than its own IP length says
  segmented,            // a chained mbuf (the driver keeps frames in one segment)
  wrong_mac,            // not addressed to this port
  not_ipv4,             // ethertype, version, or IP options
  ip_fragment,          // MF or fragment offset set
  not_udp,
  bad_ip_length,        // total length below the headers or beyond the frame
  bad_ip_checksum,
  wrong_ip,             // destination is not this process
  bad_udp_length,       // disagrees with the IP length
  wrong_udp_port,       // destination port is not this channel's
  bad_udp_checksum,
  bad_magic,
  bad_version,
  bad_type,
  bad_reserved,
  wrong_channel,        // header channel differs from the port it came to, or out of range
  wrong_dst,            // header destination is not this process
  bad_payload_length,   // disagrees with UDP, above max message, or non-zero on a control frame
  // Checked by the channel, against its peers:
  unknown_src,          // not one of this channel's peers
  wrong_job,            // job id of another job or another incarnation
  wrong_source_address, // mac, ip or port not the peer's
  bad_ack,              // acknowledges data never sent
  out_of_window,        // a sequence number the receiver never offered room for
};
const char* verdict_name(Verdict verdict);

// What a frame must carry to be for this channel. Host byte order.
struct RxExpect {
  MacAddr mac;
  std::uint32_t ip = 0;
  std::uint16_t udp_port = 0;  // this channel's port
  std::uint16_t channel = 0;
  std::uint32_t self = 0;
  std::uint32_t max_payload = 0;
};

// Checks every field that needs no per-peer state, in order, and fills `out`. `ip_checksum_good`
// / `udp_checksum_good`: the NIC verified them already (offload), so the software skips them.
Verdict parse_frame(const std::uint8_t* frame, std::size_t len, const RxExpect& expect, bool ip_checksum_good,
                    bool udp_checksum_good, FrameHeader* out);

// "02:53:43:00:00:01"; parse_mac takes six groups of one or two hex digits separated by ':'
// and nothing else (the text may come from a peer).
std::string mac_text(const MacAddr& mac);
bool parse_mac(const std::string& text, MacAddr* out);
// "10.0.0.2"; parse_ipv4 takes exactly a dotted quad (inet_pton), nothing after it.
std::string ip_text(std::uint32_t ip);
bool parse_ipv4(const std::string& text, std::uint32_t* out);

}  // namespace sparcoll::transport::dpdk
