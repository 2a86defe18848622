#include <cstring>

#include "proto/wire.hpp"

namespace sparcoll::proto {

// Tensors are limited to 2^56 elements so block/element arithmetic never overflows 64 bits.
static constexpr std::uint64_t kMaxCount = std::uint64_t{1} << 56;
static constexpr std::uint32_t kMaxBlockElems = 1u << 20;

const char* describe(DecodeError e) noexcept {
  switch (e) {
    case DecodeError::none: return "ok";
    case DecodeError::too_short: return "message shorter than the 64-byte header";
    case DecodeError::bad_magic: return "bad magic";
    case DecodeError::bad_version: return "unsupported protocol version";
    case DecodeError::bad_type: return "unknown message type";
    case DecodeError::bad_dtype: return "unknown dtype";
    case DecodeError::bad_redop: return "unknown reduction op";
    case DecodeError::bad_length: return "payload length does not match the header";
    case DecodeError::bad_geometry: return "invalid tensor geometry (count, block size or lane)";
    case DecodeError::bad_index: return "block index out of range, outside its lane or not increasing";
    case DecodeError::bad_next: return "next-block index outside the lane or not after the message's blocks";
    case DecodeError::bad_sender: return "sender index out of range";
  }
  return "unknown decode error";
}

std::uint64_t payload_bytes(const Geometry& g, const std::uint64_t* indices, std::uint32_t n) noexcept {
  std::uint64_t bytes = std::uint64_t{n} * sizeof(std::uint64_t);
  for (std::uint32_t i = 0; i < n; ++i) bytes += g.block_bytes_at(indices[i]);
  return bytes;
}

WireHeader make_header(MsgType type, const Geometry& g, ReduceOp op, std::uint32_t job_epoch, std::uint32_t op_id,
                       std::uint32_t lane, std::uint32_t sender) noexcept {
  WireHeader h{};
  h.magic = kMagic;
  h.version = kVersion;
  h.type = static_cast<std::uint8_t>(type);
  h.dtype = static_cast<std::uint8_t>(g.dtype);
  h.redop = static_cast<std::uint8_t>(op);
  h.job_epoch = job_epoch;
  h.op_id = op_id;
  h.lane = lane;
  h.sender = sender;
  h.count = g.count;
  h.next_index = kEnd;
  h.block_elems = g.block_elems;
  h.num_lanes = g.num_lanes;
  return h;
}

DecodeError decode(const std::byte* data, std::size_t size, std::uint32_t nprocs, MessageView* out) noexcept {
  if (size < sizeof(WireHeader)) return DecodeError::too_short;
  const auto* h = reinterpret_cast<const WireHeader*>(data);
  if (h->magic != kMagic) return DecodeError::bad_magic;
  if (h->version != kVersion) return DecodeError::bad_version;
  if (h->type < static_cast<std::uint8_t>(MsgType::window) || h->type > static_cast<std::uint8_t>(MsgType::abort))
    return DecodeError::bad_type;
  // Block-sparse aggregation reduces the 32-bit types only (no rank issues it on f64 or i64).
  if (!dtype_valid(h->dtype) || dtype_is_wide(static_cast<DataType>(h->dtype))) return DecodeError::bad_dtype;
  if (!reduce_op_valid(h->redop)) return DecodeError::bad_redop;
  // Bitwise ops take integers only: no rank issues them on floats.
  if (reduce_op_is_bitwise(static_cast<ReduceOp>(h->redop)) && h->dtype != static_cast<std::uint8_t>(DataType::i32))
    return DecodeError::bad_redop;
  if (h->payload_len != size - sizeof(WireHeader)) return DecodeError::bad_length;
  if (h->sender >= nprocs) return DecodeError::bad_sender;
  if (h->block_elems == 0 || h->block_elems > kMaxBlockElems || h->count > kMaxCount || h->num_lanes == 0 ||
      h->lane >= h->num_lanes)
    return DecodeError::bad_geometry;

  MessageView v;
  v.header = h;
  v.geometry.count = h->count;
  v.geometry.block_elems = h->block_elems;
  v.geometry.num_lanes = h->num_lanes;
  v.geometry.dtype = static_cast<DataType>(h->dtype);
  const std::byte* payload = data + sizeof(WireHeader);
  const auto type = static_cast<MsgType>(h->type);

  if (type == MsgType::error || type == MsgType::abort) {
    if (h->nblocks != 0 || h->payload_len > kMaxReasonBytes) return DecodeError::bad_length;
    v.reason = reinterpret_cast<const char*>(payload);
    v.reason_len = h->payload_len;
    *out = v;
    return DecodeError::none;
  }

  const std::uint64_t nblocks_total = v.geometry.nblocks();
  const std::uint64_t index_bytes = std::uint64_t{h->nblocks} * sizeof(std::uint64_t);
  if (index_bytes > h->payload_len) return DecodeError::bad_length;
  const auto* indices = reinterpret_cast<const std::uint64_t*>(payload);
  std::uint64_t data_bytes = 0;
  for (std::uint32_t i = 0; i < h->nblocks; ++i) {
    const std::uint64_t b = indices[i];
    if (b >= nblocks_total || b % h->num_lanes != h->lane) return DecodeError::bad_index;
    if (i > 0 && b <= indices[i - 1]) return DecodeError::bad_index;
    data_bytes += v.geometry.block_bytes_at(b);
  }
  if (h->flags & kFlagLocalData) data_bytes = 0;
  if (index_bytes + data_bytes != h->payload_len) return DecodeError::bad_length;
  const bool has_next = type == MsgType::window || (h->flags & kFlagFinal);
  if (has_next && h->next_index != kEnd) {
    if (h->next_index >= nblocks_total || h->next_index % h->num_lanes != h->lane) return DecodeError::bad_next;
    if (h->nblocks > 0 && h->next_index <= indices[h->nblocks - 1]) return DecodeError::bad_next;
  }
  v.indices = indices;
  v.blocks = payload + index_bytes;
  *out = v;
  return DecodeError::none;
}

}  // namespace sparcoll::proto
