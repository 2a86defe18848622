// The wire format of block-sparse aggregation (docs/protocol.md has the byte layout and the
// state machine). Every message starts with a 64-byte WireHeader, little-endian (the build
// refuses big-endian hosts), followed by a payload:
//   window / result: nblocks x u64 block indices (strictly increasing, all in the message's
//                    lane), then the blocks' elements back to back (the tensor's last block may
//                    be short);
//   error / abort:   a UTF-8 reason.
// This folder is the only code that interprets bytes received from peers.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

#include "sparcoll/types.hpp"

namespace sparcoll::proto {

static_assert(std::endian::native == std::endian::little, "the wire format is little-endian; port proto/ first");

inline constexpr std::uint16_t kMagic = 0x4353;  // bytes 'S' 'C'
inline constexpr std::uint8_t kVersion = 1;
inline constexpr std::uint64_t kEnd = ~std::uint64_t{0};  // "no further non-zero block"
inline constexpr std::uint32_t kMaxReasonBytes = 1024;

enum class MsgType : std::uint8_t {
  window = 1,  // worker -> aggregator: this worker's next non-zero blocks of a lane
  result = 2,  // aggregator -> worker: reduced blocks of a lane (+ next global block when final)
  error = 3,   // aggregator -> worker: the lane failed; payload is the reason
  abort = 4,   // worker -> aggregator: this worker cannot take part in the op; payload is the reason
};

enum HeaderFlags : std::uint32_t {
  kFlagFinal = 1u << 0,  // result: last message of a round; next_index is valid
  // The blocks are not in the payload (indices only): sender and receiver are the same process
  // (co-located worker and aggregator), which reads them from the op's own buffers. Only valid
  // on the loopback; the engine rejects it from any other peer.
  kFlagLocalData = 1u << 1,
};

struct WireHeader {
  std::uint16_t magic;
  std::uint8_t version;
  std::uint8_t type;         // MsgType
  std::uint8_t dtype;        // DataType of the blocks (and of the user's tensor)
  std::uint8_t redop;        // ReduceOp
  std::uint16_t nblocks;     // blocks in this message
  std::uint32_t job_epoch;   // identifies the job (derived from the job token); stale jobs are dropped
  std::uint32_t op_id;       // the collective, numbered from 0 by every worker in call order
  std::uint32_t lane;        // the lane (slot) this message belongs to
  std::uint32_t sender;      // the sender's process index
  std::uint64_t count;       // elements in the tensor
  std::uint64_t next_index;  // window: sender's next non-zero block in the lane; result: next global block; or kEnd
  std::uint32_t block_elems; // elements per block
  std::uint32_t payload_len; // bytes after the header
  std::uint32_t num_lanes;   // lanes the tensor is striped over
  std::uint32_t status;      // error/abort: ErrorCode
  std::uint32_t flags;       // HeaderFlags
  std::uint32_t reserved;    // zero
};
static_assert(sizeof(WireHeader) == 64, "wire header is 64 bytes");
static_assert(alignof(WireHeader) <= 8);

// Geometry shared by both ends of a lane.
struct Geometry {
  std::uint64_t count = 0;
  std::uint32_t block_elems = 1;
  std::uint32_t num_lanes = 1;
  DataType dtype = DataType::f32;

  std::uint64_t nblocks() const noexcept { return (count + block_elems - 1) / block_elems; }
  std::uint32_t elem_size() const noexcept { return static_cast<std::uint32_t>(dtype_size(dtype)); }
  std::uint64_t block_elems_at(std::uint64_t b) const noexcept {
    std::uint64_t first = b * block_elems;
    std::uint64_t left = count - first;
    return left < block_elems ? left : block_elems;
  }
  std::uint64_t block_bytes_at(std::uint64_t b) const noexcept { return block_elems_at(b) * elem_size(); }
  std::uint64_t full_block_bytes() const noexcept { return std::uint64_t{block_elems} * elem_size(); }
};

// Why a message was refused (counted, and turned into a Status with describe()).
enum class DecodeError : std::uint8_t {
  none = 0,
  too_short,
  bad_magic,
  bad_version,
  bad_type,
  bad_dtype,
  bad_redop,
  bad_length,
  bad_geometry,   // block_elems 0, lane >= num_lanes, count too large
  bad_index,      // block index out of range, not in the lane, not increasing
  bad_next,       // next index not in the lane or not after the message's blocks
  bad_sender,
};
const char* describe(DecodeError e) noexcept;

// A validated view of a received message. Pointers point into the receive buffer.
struct MessageView {
  const WireHeader* header = nullptr;
  const std::uint64_t* indices = nullptr;  // nblocks entries
  const std::byte* blocks = nullptr;       // the blocks' bytes, back to back
  const char* reason = nullptr;            // error/abort
  std::uint32_t reason_len = 0;
  Geometry geometry;
};

// Checks everything that can be checked without engine state: framing, known type/dtype/op,
// lengths, block indices in range, in the lane and strictly increasing, next pointer sane,
// sender < nprocs. Never reads outside [data, data + size).
DecodeError decode(const std::byte* data, std::size_t size, std::uint32_t nprocs, MessageView* out) noexcept;

// Bytes of payload for the given blocks (indices + elements).
std::uint64_t payload_bytes(const Geometry& g, const std::uint64_t* indices, std::uint32_t n) noexcept;

// Fills a header; payload_len and nblocks are set by the caller.
WireHeader make_header(MsgType type, const Geometry& g, ReduceOp op, std::uint32_t job_epoch, std::uint32_t op_id,
                       std::uint32_t lane, std::uint32_t sender) noexcept;

}  // namespace sparcoll::proto
