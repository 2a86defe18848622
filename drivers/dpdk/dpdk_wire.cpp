#include "dpdk_wire.hpp"

#include <arpa/inet.h>

#include <cstdio>
#include <cstring>

namespace sparcoll::transport::dpdk {
namespace {

void put_be16(std::uint8_t* p, std::uint16_t v) {
  p[0] = static_cast<std::uint8_t>(v >> 8);
  p[1] = static_cast<std::uint8_t>(v);
}
void put_be32(std::uint8_t* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(v >> (24 - 8 * i));
}
std::uint16_t be16(const std::uint8_t* p) { return static_cast<std::uint16_t>((p[0] << 8) | p[1]); }
std::uint32_t be32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | p[3];
}
// The transport header is little-endian, like the host (the build refuses big-endian hosts).
template <typename T>
void put_le(std::uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof v);
}
template <typename T>
T le(const std::uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// One's-complement sum of 16-bit big-endian words, not folded.
std::uint64_t sum16(const std::uint8_t* p, std::size_t len) {
  std::uint64_t sum = 0;
  std::size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    std::uint64_t word;
    std::memcpy(&word, p + i, 8);
    // Byte-swapped 16-bit lanes sum to the byte-swapped result; swap once at the end instead.
    sum += (word & 0xffff) + ((word >> 16) & 0xffff) + ((word >> 32) & 0xffff) + (word >> 48);
  }
  std::uint64_t tail = 0;
  for (; i + 2 <= len; i += 2) tail += std::uint64_t{p[i]} | (std::uint64_t{p[i + 1]} << 8);
  if (i < len) tail += p[i];
  sum += tail;
  // Fold to 16 bits (little-endian lanes), then swap into network order.
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return ((sum & 0xff) << 8) | (sum >> 8);
}

std::uint16_t fold(std::uint64_t sum) {
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<std::uint16_t>(sum);
}

}  // namespace

std::uint16_t ipv4_checksum(const std::uint8_t* ip) {
  std::uint8_t copy[kIpLen];
  std::memcpy(copy, ip, kIpLen);
  copy[10] = copy[11] = 0;
  return static_cast<std::uint16_t>(~fold(sum16(copy, kIpLen)));
}

std::uint16_t udp_pseudo_header_sum(const std::uint8_t* frame) {
  const std::uint8_t* ip = frame + kIpOffset;
  const std::uint16_t udp_len = be16(frame + kUdpOffset + 4);
  std::uint64_t sum = sum16(ip + 12, 8);  // source and destination addresses
  sum += kIpProtoUdp;
  sum += udp_len;
  return fold(sum);
}

std::uint16_t udp_checksum(const std::uint8_t* frame) {
  const std::uint8_t* udp = frame + kUdpOffset;
  const std::uint16_t udp_len = be16(udp + 4);
  std::uint64_t sum = udp_pseudo_header_sum(frame);
  sum += sum16(udp, 6);  // ports and length; the checksum field counts as 0
  if (udp_len > kUdpLen) sum += sum16(udp + kUdpLen, udp_len - kUdpLen);
  const std::uint16_t result = static_cast<std::uint16_t>(~fold(sum));
  return result == 0 ? 0xffff : result;
}

void write_headers(std::uint8_t* out, const FrameHeader& h, bool ip_checksum) {
  std::memcpy(out, h.dst_mac.bytes, 6);
  std::memcpy(out + 6, h.src_mac.bytes, 6);
  put_be16(out + 12, kEtherTypeIpv4);
  std::uint8_t* ip = out + kIpOffset;
  const std::uint16_t ip_total = static_cast<std::uint16_t>(kIpLen + kUdpLen + kTransportLen + h.payload_len);
  ip[0] = 0x45;
  ip[1] = 0;
  put_be16(ip + 2, ip_total);
  put_be16(ip + 4, 0);       // id: 0 is fine with DF set (RFC 6864)
  put_be16(ip + 6, 0x4000);  // DF, no fragments
  ip[8] = 64;
  ip[9] = kIpProtoUdp;
  put_be16(ip + 10, 0);
  put_be32(ip + 12, h.src_ip);
  put_be32(ip + 16, h.dst_ip);
  if (ip_checksum) put_be16(ip + 10, ipv4_checksum(ip));
  std::uint8_t* udp = out + kUdpOffset;
  put_be16(udp, h.src_port);
  put_be16(udp + 2, h.dst_port);
  put_be16(udp + 4, static_cast<std::uint16_t>(kUdpLen + kTransportLen + h.payload_len));
  put_be16(udp + 6, 0);
  put_le<std::uint16_t>(out + field::magic, kMagic);
  out[field::version] = kVersion;
  out[field::type] = static_cast<std::uint8_t>(h.type);
  put_le<std::uint16_t>(out + field::channel, h.channel);
  put_le<std::uint64_t>(out + field::job_id, h.job_id);
  put_le<std::uint32_t>(out + field::src, h.src);
  put_le<std::uint32_t>(out + field::dst, h.dst);
  put_le<std::uint64_t>(out + field::seq, h.seq);
  put_le<std::uint64_t>(out + field::ack, h.ack);
  put_le<std::uint64_t>(out + field::sack, h.sack);
  put_le<std::uint64_t>(out + field::limit, h.limit);
  put_le<std::uint32_t>(out + field::payload_len, h.payload_len);
  put_le<std::uint32_t>(out + field::reserved, 0);
}

std::size_t build_frame(std::uint8_t* out, const FrameHeader& h, const void* payload, bool with_udp_checksum) {
  write_headers(out, h, true);
  if (h.payload_len > 0) std::memcpy(out + kHeadersLen, payload, h.payload_len);
  if (with_udp_checksum) put_be16(out + kUdpOffset + 6, udp_checksum(out));
  return kHeadersLen + h.payload_len;
}

Verdict parse_frame(const std::uint8_t* frame, std::size_t len, const RxExpect& expect, bool ip_checksum_good,
                    bool udp_checksum_good, FrameHeader* out) {
  if (len < kHeadersLen) return Verdict::truncated;
  if (std::memcmp(frame, expect.mac.bytes, 6) != 0) return Verdict::wrong_mac;
  if (be16(frame + 12) != kEtherTypeIpv4) return Verdict::not_ipv4;
  const std::uint8_t* ip = frame + kIpOffset;
  if (ip[0] != 0x45) return Verdict::not_ipv4;  // version 4, no options
  if ((be16(ip + 6) & 0x3fff) != 0) return Verdict::ip_fragment;
  if (ip[9] != kIpProtoUdp) return Verdict::not_udp;
  const std::uint16_t ip_total = be16(ip + 2);
  // Ethernet may pad short frames, so the frame can be longer than the IP packet, never shorter.
  if (ip_total < kIpLen + kUdpLen + kTransportLen || kEthLen + std::size_t{ip_total} > len) return Verdict::bad_ip_length;
  if (!ip_checksum_good && ipv4_checksum(ip) != be16(ip + 10)) return Verdict::bad_ip_checksum;
  if (be32(ip + 16) != expect.ip) return Verdict::wrong_ip;
  const std::uint8_t* udp = frame + kUdpOffset;
  const std::uint16_t udp_len = be16(udp + 4);
  if (udp_len != ip_total - kIpLen) return Verdict::bad_udp_length;
  if (be16(udp + 2) != expect.udp_port) return Verdict::wrong_udp_port;
  const std::uint16_t udp_sum = be16(udp + 6);
  if (udp_sum != 0 && !udp_checksum_good && udp_checksum(frame) != udp_sum) return Verdict::bad_udp_checksum;
  if (le<std::uint16_t>(frame + field::magic) != kMagic) return Verdict::bad_magic;
  if (frame[field::version] != kVersion) return Verdict::bad_version;
  const std::uint8_t type = frame[field::type];
  if (type < static_cast<std::uint8_t>(FrameType::data) || type > static_cast<std::uint8_t>(FrameType::fin_ack))
    return Verdict::bad_type;
  if (le<std::uint32_t>(frame + field::reserved) != 0) return Verdict::bad_reserved;
  if (le<std::uint16_t>(frame + field::channel) != expect.channel) return Verdict::wrong_channel;
  if (le<std::uint32_t>(frame + field::dst) != expect.self) return Verdict::wrong_dst;
  const std::uint32_t payload_len = le<std::uint32_t>(frame + field::payload_len);
  if (payload_len != udp_len - kUdpLen - kTransportLen) return Verdict::bad_payload_length;
  if (static_cast<FrameType>(type) == FrameType::data ? payload_len > expect.max_payload : payload_len != 0)
    return Verdict::bad_payload_length;

  std::memcpy(out->dst_mac.bytes, frame, 6);
  std::memcpy(out->src_mac.bytes, frame + 6, 6);
  out->src_ip = be32(ip + 12);
  out->dst_ip = be32(ip + 16);
  out->src_port = be16(udp);
  out->dst_port = be16(udp + 2);
  out->type = static_cast<FrameType>(type);
  out->channel = expect.channel;
  out->job_id = le<std::uint64_t>(frame + field::job_id);
  out->src = le<std::uint32_t>(frame + field::src);
  out->dst = expect.self;
  out->seq = le<std::uint64_t>(frame + field::seq);
  out->ack = le<std::uint64_t>(frame + field::ack);
  out->sack = le<std::uint64_t>(frame + field::sack);
  out->limit = le<std::uint64_t>(frame + field::limit);
  out->payload_len = payload_len;
  return Verdict::ok;
}

const char* verdict_name(Verdict verdict) {
  switch (verdict) {
    case Verdict::ok: return "ok";
    case Verdict::truncated: return "truncated";
    case Verdict::segmented: return "segmented";
    case Verdict::wrong_mac: return "wrong mac";
    case Verdict::not_ipv4: return "not ipv4";
    case Verdict::ip_fragment: return "ip fragment";
    case Verdict::not_udp: return "not udp";
    case Verdict::bad_ip_length: return "bad ip length";
    case Verdict::bad_ip_checksum: return "bad ip checksum";
    case Verdict::wrong_ip: return "wrong ip";
    case Verdict::bad_udp_length: return "bad udp length";
    case Verdict::wrong_udp_port: return "wrong udp port";
    case Verdict::bad_udp_checksum: return "bad udp checksum";
    case Verdict::bad_magic: return "bad magic";
    case Verdict::bad_version: return "bad version";
    case Verdict::bad_type: return "bad type";
    case Verdict::bad_reserved: return "bad reserved";
    case Verdict::wrong_channel: return "wrong channel";
    case Verdict::wrong_dst: return "wrong destination";
    case Verdict::bad_payload_length: return "bad payload length";
    case Verdict::unknown_src: return "unknown source";
    case Verdict::wrong_job: return "wrong job";
    case Verdict::wrong_source_address: return "wrong source address";
    case Verdict::bad_ack: return "bad ack";
    case Verdict::out_of_window: return "out of window";
  }
  return "?";
}

std::string mac_text(const MacAddr& mac) {
  char text[18];
  std::snprintf(text, sizeof text, "%02x:%02x:%02x:%02x:%02x:%02x", mac.bytes[0], mac.bytes[1], mac.bytes[2],
                mac.bytes[3], mac.bytes[4], mac.bytes[5]);
  return text;
}

bool parse_mac(const std::string& text, MacAddr* out) {
  // By hand: sscanf("%2x") also took signs ("-1" as ff), leading blanks, and stopped at a NUL,
  // and this text comes from peers (their published address).
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  MacAddr mac;
  std::size_t at = 0;
  for (int group = 0; group < 6; ++group) {
    if (group > 0 && (at >= text.size() || text[at++] != ':')) return false;
    int value = 0, digits = 0;
    for (; digits < 2 && at < text.size() && hex(text[at]) >= 0; ++digits) value = value * 16 + hex(text[at++]);
    if (digits == 0) return false;
    mac.bytes[group] = static_cast<std::uint8_t>(value);
  }
  if (at != text.size()) return false;
  *out = mac;
  return true;
}

std::string ip_text(std::uint32_t ip) {
  return std::to_string(ip >> 24) + "." + std::to_string((ip >> 16) & 0xff) + "." + std::to_string((ip >> 8) & 0xff) +
         "." + std::to_string(ip & 0xff);
}

bool parse_ipv4(const std::string& text, std::uint32_t* out) {
  in_addr addr{};
  // inet_pton reads a C string: what follows a NUL would be ignored, not refused.
  if (text.find('\0') != std::string::npos || inet_pton(AF_INET, text.c_str(), &addr) != 1) return false;
  *out = ntohl(addr.s_addr);
  return true;
}

}  // namespace sparcoll::transport::dpdk
