// Fuzz target: proto::decode (src/proto/codec.cpp), the parser of every block-sparse message a
// peer sends (docs/protocol.md).
//
// 1. The input, as a received message: decode must not read outside it, and a message it accepts
//    must be consistent: every header field in range, payload_len the bytes after the header,
//    indices in range, in the lane and increasing, their blocks exactly filling the payload, the
//    views (indices, blocks, reason) inside the message, `next` in the lane after the last index.
// 2. The same bytes as choices for a valid message (geometry, lane, sender, blocks, next, flags)
//    built with make_header and payload_bytes: decode must accept it and return exactly what was
//    put in; then one byte of it changed must still give a consistent answer.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstring>
#include <string>
#include <vector>

#include "fuzz_check.hpp"
#include "fuzz_params.hpp"
#include "proto/wire.hpp"

namespace sparcoll::fuzz {
namespace {

using proto::DecodeError;
using proto::Geometry;
using proto::MessageView;
using proto::MsgType;
using proto::WireHeader;

constexpr std::uint32_t kProcs = kProtoProcs;
constexpr std::uint64_t kMaxCount = std::uint64_t{1} << 56;  // codec.cpp's limits
constexpr std::uint32_t kMaxBlockElems = 1u << 20;

void check_accepted(const std::byte* data, std::size_t size, const MessageView& v) {
  FUZZ_CHECK(v.header == reinterpret_cast<const WireHeader*>(data));
  const WireHeader& h = *v.header;
  FUZZ_CHECK(size >= sizeof(WireHeader) && size - sizeof(WireHeader) == h.payload_len);
  FUZZ_CHECK(h.magic == proto::kMagic && h.version == proto::kVersion);
  FUZZ_CHECK(h.type >= static_cast<std::uint8_t>(MsgType::window) && h.type <= static_cast<std::uint8_t>(MsgType::abort));
  FUZZ_CHECK(dtype_valid(h.dtype) && !dtype_is_wide(static_cast<DataType>(h.dtype)) && reduce_op_valid(h.redop));
  FUZZ_CHECK(!reduce_op_is_bitwise(static_cast<ReduceOp>(h.redop)) || h.dtype == static_cast<std::uint8_t>(DataType::i32));
  FUZZ_CHECK(h.sender < kProcs);
  FUZZ_CHECK(h.block_elems >= 1 && h.block_elems <= kMaxBlockElems && h.count <= kMaxCount);
  FUZZ_CHECK(h.num_lanes >= 1 && h.lane < h.num_lanes);
  const Geometry& g = v.geometry;
  FUZZ_CHECK(g.count == h.count && g.block_elems == h.block_elems && g.num_lanes == h.num_lanes &&
             static_cast<std::uint8_t>(g.dtype) == h.dtype);
  const std::byte* payload = data + sizeof(WireHeader);
  const std::byte* end = data + size;
  const auto type = static_cast<MsgType>(h.type);

  if (type == MsgType::error || type == MsgType::abort) {
    FUZZ_CHECK(h.nblocks == 0);
    FUZZ_CHECK(reinterpret_cast<const std::byte*>(v.reason) == payload && v.reason_len == h.payload_len);
    FUZZ_CHECK(v.reason_len <= proto::kMaxReasonBytes);
    touch(v.reason, v.reason_len);
    return;
  }
  FUZZ_CHECK(reinterpret_cast<const std::byte*>(v.indices) == payload);
  const std::uint64_t index_bytes = std::uint64_t{h.nblocks} * sizeof(std::uint64_t);
  FUZZ_CHECK(index_bytes <= h.payload_len);
  FUZZ_CHECK(v.blocks == payload + index_bytes);
  const std::uint64_t total_blocks = g.nblocks();
  std::uint64_t data_bytes = 0;
  for (std::uint32_t i = 0; i < h.nblocks; ++i) {
    const std::uint64_t b = v.indices[i];
    FUZZ_CHECK(b < total_blocks && b % h.num_lanes == h.lane);
    FUZZ_CHECK(i == 0 || b > v.indices[i - 1]);
    FUZZ_CHECK(g.block_bytes_at(b) >= 1 && g.block_bytes_at(b) <= g.full_block_bytes());
    data_bytes += g.block_bytes_at(b);
  }
  FUZZ_CHECK(proto::payload_bytes(g, v.indices, h.nblocks) == index_bytes + data_bytes);
  const bool local = (h.flags & proto::kFlagLocalData) != 0;
  const std::uint64_t carried = local ? 0 : data_bytes;
  FUZZ_CHECK(index_bytes + carried == h.payload_len);
  FUZZ_CHECK(v.blocks + carried == end);
  touch(v.blocks, static_cast<std::size_t>(carried));
  const bool has_next = type == MsgType::window || (h.flags & proto::kFlagFinal);
  if (has_next && h.next_index != proto::kEnd) {
    FUZZ_CHECK(h.next_index < total_blocks && h.next_index % h.num_lanes == h.lane);
    FUZZ_CHECK(h.nblocks == 0 || h.next_index > v.indices[h.nblocks - 1]);
  }
}

void decode_raw(const std::uint8_t* bytes, std::size_t size) {
  const ExactCopy copy(bytes, size);
  MessageView v;
  const DecodeError e = proto::decode(copy.data(), copy.size(), kProcs, &v);
  FUZZ_CHECK(std::strlen(proto::describe(e)) > 0);
  if (e == DecodeError::none) check_accepted(copy.data(), copy.size(), v);
  if (size < sizeof(WireHeader)) FUZZ_CHECK(e == DecodeError::too_short);
}

// A valid message from the fuzzer's choices, encoded the way the engine encodes it.
struct Built {
  std::vector<std::uint64_t> storage;  // 8-byte aligned bytes of the message
  std::size_t size = 0;
  WireHeader header{};
  std::vector<std::uint64_t> indices;
  std::string reason;
  const std::byte* bytes() const { return reinterpret_cast<const std::byte*>(storage.data()); }
};

Built build(FuzzedDataProvider& in) {
  Geometry g;
  g.dtype = static_cast<DataType>(in.ConsumeIntegralInRange<std::uint8_t>(0, 3));
  g.block_elems = in.ConsumeBool() ? in.ConsumeIntegralInRange<std::uint32_t>(1, 64)
                                   : in.ConsumeIntegralInRange<std::uint32_t>(1, kMaxBlockElems);
  g.num_lanes = in.ConsumeIntegralInRange<std::uint32_t>(1, 70);
  g.count = in.ConsumeBool() ? in.ConsumeIntegralInRange<std::uint64_t>(0, 5000)
                             : in.ConsumeIntegralInRange<std::uint64_t>(0, kMaxCount);
  const std::uint32_t lane = in.ConsumeIntegralInRange<std::uint32_t>(0, g.num_lanes - 1);
  const std::uint32_t sender = in.ConsumeIntegralInRange<std::uint32_t>(0, kProcs - 1);
  const auto type = static_cast<MsgType>(in.ConsumeIntegralInRange<std::uint8_t>(1, 4));
  const auto op = static_cast<ReduceOp>(in.ConsumeIntegralInRange<std::uint8_t>(0, 3));
  Built m;
  m.header = proto::make_header(type, g, op, in.ConsumeIntegral<std::uint32_t>(), in.ConsumeIntegral<std::uint32_t>(),
                                lane, sender);
  WireHeader& h = m.header;
  std::vector<std::byte> payload;
  if (type == MsgType::error || type == MsgType::abort) {
    h.status = in.ConsumeIntegral<std::uint32_t>();
    m.reason = in.ConsumeRandomLengthString(proto::kMaxReasonBytes);
    payload.resize(m.reason.size());
    if (!m.reason.empty()) std::memcpy(payload.data(), m.reason.data(), m.reason.size());
  } else {
    // Blocks of the lane, increasing, whole messages kept small: at most 32 blocks of at most 64 KiB.
    const std::uint64_t total = g.nblocks();
    const bool small_blocks = g.full_block_bytes() <= 65536;
    std::uint64_t b = lane;
    if (total > lane) b += g.num_lanes * in.ConsumeIntegralInRange<std::uint64_t>(0, (total - 1 - lane) / g.num_lanes);
    while (small_blocks && b < total && m.indices.size() < 32 && in.ConsumeBool()) {
      m.indices.push_back(b);
      const std::uint64_t skip = in.ConsumeIntegralInRange<std::uint64_t>(1, 3);
      if (b > total || total - b <= skip * g.num_lanes) break;
      b += skip * g.num_lanes;
    }
    h.nblocks = static_cast<std::uint16_t>(m.indices.size());
    const bool final = in.ConsumeBool();
    const bool local = in.ConsumeBool();
    h.flags = (final ? proto::kFlagFinal : 0) | (local ? proto::kFlagLocalData : 0);
    // next: END, or a block of the lane after the last one sent.
    const std::uint64_t after = m.indices.empty() ? lane : m.indices.back() + g.num_lanes;
    if (after < total && in.ConsumeBool()) {
      h.next_index = after + g.num_lanes * in.ConsumeIntegralInRange<std::uint64_t>(0, (total - 1 - after) / g.num_lanes);
    }
    payload.resize(m.indices.size() * sizeof(std::uint64_t));
    if (!m.indices.empty()) std::memcpy(payload.data(), m.indices.data(), payload.size());
    if (!local) {
      const std::uint64_t data_bytes = proto::payload_bytes(g, m.indices.data(), h.nblocks) - payload.size();
      for (std::uint64_t i = 0; i < data_bytes; ++i) payload.push_back(static_cast<std::byte>(i * 31 + h.op_id));
    }
  }
  h.payload_len = static_cast<std::uint32_t>(payload.size());
  m.size = sizeof(WireHeader) + payload.size();
  m.storage.assign((m.size + 7) / 8, 0);
  std::memcpy(m.storage.data(), &h, sizeof h);
  if (!payload.empty()) std::memcpy(reinterpret_cast<std::byte*>(m.storage.data()) + sizeof h, payload.data(), payload.size());
  return m;
}

void round_trip(FuzzedDataProvider& in) {
  const Built m = build(in);
  const ExactCopy copy(m.bytes(), m.size);
  MessageView v;
  const DecodeError e = proto::decode(copy.data(), copy.size(), kProcs, &v);
  if (e != DecodeError::none) {
    std::fprintf(stderr, "fuzz: a valid message was refused: %s\n", proto::describe(e));
    FUZZ_CHECK(e == DecodeError::none);
  }
  check_accepted(copy.data(), copy.size(), v);
  FUZZ_CHECK(std::memcmp(v.header, &m.header, sizeof m.header) == 0);
  if (m.header.type == static_cast<std::uint8_t>(MsgType::error) || m.header.type == static_cast<std::uint8_t>(MsgType::abort)) {
    FUZZ_CHECK(std::string(v.reason, v.reason_len) == m.reason);
  } else {
    for (std::size_t i = 0; i < m.indices.size(); ++i) FUZZ_CHECK(v.indices[i] == m.indices[i]);
  }

  // One byte changed (a bit flip, or a chosen value), anywhere in the message.
  if (m.size == 0 || in.remaining_bytes() == 0) return;
  const ExactCopy mutated(m.bytes(), m.size);
  const std::size_t at = in.ConsumeIntegralInRange<std::size_t>(0, m.size - 1);
  const auto value = in.ConsumeIntegral<std::uint8_t>();
  mutated.data()[at] = in.ConsumeBool() ? static_cast<std::byte>(value) : mutated.data()[at] ^ static_cast<std::byte>(value | 1);
  MessageView w;
  if (proto::decode(mutated.data(), mutated.size(), kProcs, &w) == DecodeError::none)
    check_accepted(mutated.data(), mutated.size(), w);
}

}  // namespace
}  // namespace sparcoll::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  sparcoll::fuzz::decode_raw(data, size);
  FuzzedDataProvider in(data, size);
  sparcoll::fuzz::round_trip(in);
  return 0;
}
