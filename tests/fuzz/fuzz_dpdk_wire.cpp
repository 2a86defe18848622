// Fuzz target: the dpdk driver's frame parser (drivers/dpdk/dpdk_wire.cpp): parse_frame with its
// RxExpect, the checksums, and the address parsers parse_mac and parse_ipv4, which read the
// addresses peers publish through the store.
//
// 1. The input, as a received Ethernet frame for a fixed RxExpect (the seeds are addressed to
//    it), parsed with software checksums and with checksums the NIC claims it verified: an
//    accepted frame is addressed to us, its IP and UDP lengths agree with each other and fit the
//    frame, its payload fits and is empty on a control frame, its checksums (when not offloaded)
//    are right, every field returned is the one in the bytes, and headers written back from the
//    result are the input's headers.
// 2. The same bytes as choices for a frame (addresses, ports, type, sequence fields, payload,
//    UDP checksum or not) built with build_frame: accepted with every field equal; one byte of
//    it changed must still give a consistent answer.
// 3. The same bytes as text for parse_mac and parse_ipv4: accepted text must be exactly an
//    address in the documented form ("02:53:43:00:00:01", "10.0.0.2"); mac_text/ip_text of any
//    address parse back to it.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstring>
#include <string>
#include <vector>

#include "dpdk_wire.hpp"
#include "fuzz_check.hpp"
#include "fuzz_params.hpp"

namespace sparcoll::fuzz {
namespace {

namespace dpdk = transport::dpdk;
using dpdk::FrameHeader;
using dpdk::RxExpect;
using dpdk::Verdict;

constexpr std::uint32_t kMaxPayload = kDpdkMaxPayload;

RxExpect fixed_expect() {
  RxExpect e;
  std::memcpy(e.mac.bytes, kDpdkMac, 6);
  e.ip = kDpdkIp;
  e.udp_port = kDpdkPort;
  e.channel = kDpdkChannel;
  e.self = kDpdkSelf;
  e.max_payload = kMaxPayload;
  return e;
}

std::uint16_t be16(const std::uint8_t* p) { return static_cast<std::uint16_t>((p[0] << 8) | p[1]); }
std::uint32_t be32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | p[3];
}
template <typename T>
T le(const std::uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

void check_accepted(const std::uint8_t* frame, std::size_t len, const RxExpect& e, bool offloaded, const FrameHeader& h) {
  FUZZ_CHECK(len >= dpdk::kHeadersLen);
  FUZZ_CHECK(std::memcmp(frame, e.mac.bytes, 6) == 0 && h.dst_mac == e.mac);
  FUZZ_CHECK(std::memcmp(frame + 6, h.src_mac.bytes, 6) == 0);
  FUZZ_CHECK(be16(frame + 12) == dpdk::kEtherTypeIpv4);
  const std::uint8_t* ip = frame + dpdk::kIpOffset;
  const std::uint8_t* udp = frame + dpdk::kUdpOffset;
  FUZZ_CHECK(ip[0] == 0x45 && (be16(ip + 6) & 0x3fff) == 0 && ip[9] == dpdk::kIpProtoUdp);
  const std::uint16_t ip_total = be16(ip + 2);
  const std::uint16_t udp_len = be16(udp + 4);
  FUZZ_CHECK(dpdk::kEthLen + std::size_t{ip_total} <= len);
  FUZZ_CHECK(std::size_t{udp_len} + dpdk::kIpLen == ip_total);
  FUZZ_CHECK(std::size_t{h.payload_len} + dpdk::kUdpLen + dpdk::kTransportLen == udp_len);
  FUZZ_CHECK(dpdk::kHeadersLen + std::size_t{h.payload_len} <= len);
  if (h.type == dpdk::FrameType::data)
    FUZZ_CHECK(h.payload_len <= e.max_payload);
  else
    FUZZ_CHECK(h.payload_len == 0);
  if (!offloaded) {
    FUZZ_CHECK(dpdk::ipv4_checksum(ip) == be16(ip + 10));
    FUZZ_CHECK(be16(udp + 6) == 0 || dpdk::udp_checksum(frame) == be16(udp + 6));
  }
  FUZZ_CHECK(h.src_ip == be32(ip + 12) && h.dst_ip == be32(ip + 16) && h.dst_ip == e.ip);
  FUZZ_CHECK(h.src_port == be16(udp) && h.dst_port == be16(udp + 2) && h.dst_port == e.udp_port);
  FUZZ_CHECK(le<std::uint16_t>(frame + dpdk::field::magic) == dpdk::kMagic && frame[dpdk::field::version] == dpdk::kVersion);
  FUZZ_CHECK(static_cast<std::uint8_t>(h.type) == frame[dpdk::field::type]);
  FUZZ_CHECK(h.type >= dpdk::FrameType::data && h.type <= dpdk::FrameType::fin_ack);
  FUZZ_CHECK(h.channel == e.channel && le<std::uint16_t>(frame + dpdk::field::channel) == e.channel);
  FUZZ_CHECK(h.dst == e.self && le<std::uint32_t>(frame + dpdk::field::dst) == e.self);
  FUZZ_CHECK(h.job_id == le<std::uint64_t>(frame + dpdk::field::job_id) && h.src == le<std::uint32_t>(frame + dpdk::field::src));
  FUZZ_CHECK(h.seq == le<std::uint64_t>(frame + dpdk::field::seq) && h.ack == le<std::uint64_t>(frame + dpdk::field::ack));
  FUZZ_CHECK(h.sack == le<std::uint64_t>(frame + dpdk::field::sack) &&
             h.limit == le<std::uint64_t>(frame + dpdk::field::limit));
  FUZZ_CHECK(le<std::uint32_t>(frame + dpdk::field::reserved) == 0);
  touch(frame + dpdk::kHeadersLen, h.payload_len);

  // Written back, the headers are the input's, except what parse_frame does not look at: the
  // IP tos, id, DF/reserved flag bits, ttl and the checksums.
  std::uint8_t again[dpdk::kHeadersLen];
  dpdk::write_headers(again, h, true);
  std::uint8_t original[dpdk::kHeadersLen];
  std::memcpy(original, frame, dpdk::kHeadersLen);
  for (std::uint8_t* b : {again, original}) {
    std::uint8_t* bip = b + dpdk::kIpOffset;
    bip[1] = 0;
    bip[4] = bip[5] = 0;
    bip[6] &= 0x3f;
    bip[8] = 0;
    bip[10] = bip[11] = 0;
    b[dpdk::kUdpOffset + 6] = b[dpdk::kUdpOffset + 7] = 0;
  }
  FUZZ_CHECK(std::memcmp(again, original, dpdk::kHeadersLen) == 0);
}

void parse_raw(const std::uint8_t* data, std::size_t size) {
  const ExactCopy copy(data, size);
  const auto* frame = reinterpret_cast<const std::uint8_t*>(copy.data());
  const RxExpect e = fixed_expect();
  for (const bool offloaded : {false, true}) {
    FrameHeader h;
    const Verdict v = dpdk::parse_frame(frame, size, e, offloaded, offloaded, &h);
    FUZZ_CHECK(std::strlen(dpdk::verdict_name(v)) > 0 && std::strcmp(dpdk::verdict_name(v), "?") != 0);
    if (size < dpdk::kHeadersLen) FUZZ_CHECK(v == Verdict::truncated);
    if (v == Verdict::ok) check_accepted(frame, size, e, offloaded, h);
  }
}

void round_trip(FuzzedDataProvider& in) {
  FrameHeader h;
  for (auto& b : h.dst_mac.bytes) b = in.ConsumeIntegral<std::uint8_t>();
  for (auto& b : h.src_mac.bytes) b = in.ConsumeIntegral<std::uint8_t>();
  h.src_ip = in.ConsumeIntegral<std::uint32_t>();
  h.dst_ip = in.ConsumeIntegral<std::uint32_t>();
  h.src_port = in.ConsumeIntegral<std::uint16_t>();
  h.dst_port = in.ConsumeIntegral<std::uint16_t>();
  h.type = static_cast<dpdk::FrameType>(in.ConsumeIntegralInRange<std::uint8_t>(1, 4));
  h.channel = in.ConsumeIntegral<std::uint16_t>();
  h.job_id = in.ConsumeIntegral<std::uint64_t>();
  h.src = in.ConsumeIntegral<std::uint32_t>();
  h.dst = in.ConsumeIntegral<std::uint32_t>();
  h.seq = in.ConsumeIntegral<std::uint64_t>();
  h.ack = in.ConsumeIntegral<std::uint64_t>();
  h.sack = in.ConsumeIntegral<std::uint64_t>();
  h.limit = in.ConsumeIntegral<std::uint64_t>();
  h.payload_len = h.type == dpdk::FrameType::data ? in.ConsumeIntegralInRange<std::uint32_t>(0, kMaxPayload) : 0;
  const bool udp_checksum = in.ConsumeBool();
  const std::size_t padding = in.ConsumeIntegralInRange<std::size_t>(0, 16);  // Ethernet may pad
  std::vector<std::uint8_t> payload(h.payload_len);
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<std::uint8_t>(i * 13 + h.seq);
  std::vector<std::uint8_t> frame(dpdk::kHeadersLen + h.payload_len + padding, 0);
  FUZZ_CHECK(dpdk::build_frame(frame.data(), h, payload.data(), udp_checksum) == dpdk::kHeadersLen + h.payload_len);
  RxExpect e;
  e.mac = h.dst_mac;
  e.ip = h.dst_ip;
  e.udp_port = h.dst_port;
  e.channel = h.channel;
  e.self = h.dst;
  e.max_payload = kMaxPayload;
  const ExactCopy copy(frame.data(), frame.size());
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(copy.data());
  FrameHeader back;
  const Verdict v = dpdk::parse_frame(bytes, copy.size(), e, false, false, &back);
  if (v != Verdict::ok) std::fprintf(stderr, "fuzz: a frame built by build_frame was refused: %s\n", dpdk::verdict_name(v));
  FUZZ_CHECK(v == Verdict::ok);
  check_accepted(bytes, copy.size(), e, false, back);
  FUZZ_CHECK(back.src_mac == h.src_mac && back.src_ip == h.src_ip && back.src_port == h.src_port &&
             back.type == h.type && back.job_id == h.job_id && back.src == h.src && back.seq == h.seq &&
             back.ack == h.ack && back.sack == h.sack && back.limit == h.limit && back.payload_len == h.payload_len);
  FUZZ_CHECK(h.payload_len == 0 || std::memcmp(bytes + dpdk::kHeadersLen, payload.data(), h.payload_len) == 0);

  if (in.remaining_bytes() == 0) return;
  const ExactCopy mutated(frame.data(), frame.size());
  auto* m = reinterpret_cast<std::uint8_t*>(mutated.data());
  const std::size_t at = in.ConsumeIntegralInRange<std::size_t>(0, frame.size() - 1);
  m[at] ^= static_cast<std::uint8_t>(in.ConsumeIntegral<std::uint8_t>() | 1);
  for (const bool offloaded : {false, true}) {
    FrameHeader mh;
    if (dpdk::parse_frame(m, mutated.size(), e, offloaded, offloaded, &mh) == Verdict::ok)
      check_accepted(m, mutated.size(), e, offloaded, mh);
  }
}

bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
int hex_value(char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; }

// The documented form: six groups of one or two hex digits separated by ':', nothing else.
bool mac_reference(const std::string& text, dpdk::MacAddr* out) {
  std::size_t at = 0;
  for (int group = 0; group < 6; ++group) {
    if (group > 0) {
      if (at >= text.size() || text[at] != ':') return false;
      ++at;
    }
    int value = 0, digits = 0;
    while (at < text.size() && digits < 2 && is_hex(text[at])) value = value * 16 + hex_value(text[at++]), ++digits;
    if (digits == 0) return false;
    out->bytes[group] = static_cast<std::uint8_t>(value);
  }
  return at == text.size();
}

// Four decimal numbers 0..255 without leading zeros, separated by '.', nothing else.
bool ipv4_reference(const std::string& text, std::uint32_t* out) {
  std::size_t at = 0;
  std::uint32_t ip = 0;
  for (int part = 0; part < 4; ++part) {
    if (part > 0) {
      if (at >= text.size() || text[at] != '.') return false;
      ++at;
    }
    const std::size_t start = at;
    unsigned value = 0;
    while (at < text.size() && at - start < 3 && text[at] >= '0' && text[at] <= '9') value = value * 10 + (text[at++] - '0');
    if (at == start || value > 255 || (text[start] == '0' && at - start > 1)) return false;
    ip = ip << 8 | value;
  }
  if (at != text.size()) return false;
  *out = ip;
  return true;
}

void addresses(FuzzedDataProvider& in) {
  const std::string text = in.ConsumeRandomLengthString(40);
  dpdk::MacAddr mac, expected_mac;
  const bool mac_ok = dpdk::parse_mac(text, &mac);
  FUZZ_CHECK(mac_ok == mac_reference(text, &expected_mac));
  if (mac_ok) FUZZ_CHECK(mac == expected_mac);
  std::uint32_t ip = 0, expected_ip = 0;
  const bool ip_ok = dpdk::parse_ipv4(text, &ip);
  FUZZ_CHECK(ip_ok == ipv4_reference(text, &expected_ip));
  if (ip_ok) FUZZ_CHECK(ip == expected_ip && dpdk::ip_text(ip) == text);

  dpdk::MacAddr any;
  for (auto& b : any.bytes) b = in.ConsumeIntegral<std::uint8_t>();
  dpdk::MacAddr back;
  FUZZ_CHECK(dpdk::parse_mac(dpdk::mac_text(any), &back) && back == any);
  const auto any_ip = in.ConsumeIntegral<std::uint32_t>();
  std::uint32_t ip_back = 0;
  FUZZ_CHECK(dpdk::parse_ipv4(dpdk::ip_text(any_ip), &ip_back) && ip_back == any_ip);
}

}  // namespace
}  // namespace sparcoll::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  sparcoll::fuzz::parse_raw(data, size);
  FuzzedDataProvider frame_choices(data, size);
  sparcoll::fuzz::round_trip(frame_choices);
  FuzzedDataProvider text_choices(data, size);
  sparcoll::fuzz::addresses(text_choices);
  return 0;
}
