// The header of a peer-to-peer message: what the point-to-point algorithms (ring, butterfly,
// SparCML, Ok-Topk, broadcast, allgather, ...) exchange between workers on the collective
// channel. A logical message of any size travels as fragments of at most one transport message;
// every fragment says where it belongs, so the receiver can place (or reduce) it straight into
// the destination buffer. Little-endian, like docs/protocol.md's block messages.
#pragma once

#include <cstdint>

namespace sparcoll::coll {

inline constexpr std::uint32_t kPeerMagic = 0x32504353;  // "SCP2"
inline constexpr std::uint8_t kPeerVersion = 1;

enum class PeerKind : std::uint8_t {
  data = 1,   // a fragment of a logical message
  abort = 2,  // the sender failed collective `seq`; the payload is its reason (text)
};

struct PeerHeader {
  std::uint32_t magic;    // kPeerMagic
  std::uint8_t version;   // kPeerVersion
  std::uint8_t kind;      // PeerKind
  std::uint16_t reserved; // 0
  std::uint32_t seq;      // the collective's sequence number (every rank numbers them alike)
  std::uint32_t tag;      // which message of that collective (a step of the algorithm)
  std::uint64_t total;    // bytes of the whole logical message
  std::uint64_t offset;   // where this fragment's payload starts in it
};
static_assert(sizeof(PeerHeader) == 32, "peer header layout is part of the wire format");

}  // namespace sparcoll::coll
