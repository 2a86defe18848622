// The header of a peer-to-peer message: what the point-to-point algorithms (ring, butterfly,
// SparCML, Ok-Topk, broadcast, allgather, ...) exchange between workers on the collective
// channel. A logical message of any size travels as fragments of at most one transport message;
// every fragment says where it belongs, so the receiver can place (or reduce) it straight into
// the destination buffer. Little-endian, like docs/protocol.md's block messages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace sparcoll::p2p {

inline constexpr std::uint32_t kPeerMagic = 0x32504353;  // "SCP2"
// 2: the signature (was a reserved 0). 3: the signature widened to 32 bits and the root added
// (rooted collectives: reduce, gather, scatter); the header grew from 32 to 40 bytes.
inline constexpr std::uint8_t kPeerVersion = 3;

enum class PeerKind : std::uint8_t {
  data = 1,   // a fragment of a logical message
  abort = 2,  // the sender failed collective `seq`; the payload is its reason (text)
  p2p = 3,    // a fragment of a send outside collectives (mailbox.hpp): `seq` numbers the sender's
              // messages to this receiver, `tag` is the caller's; signature and root are 0
};

struct PeerHeader {
  std::uint32_t magic;    // kPeerMagic
  std::uint8_t version;   // kPeerVersion
  std::uint8_t kind;      // PeerKind
  std::uint16_t reserved; // 0
  std::uint32_t signature;  // what the collective is (collective_signature); 0 on aborts
  std::uint32_t root;     // a rooted collective's root (reduce, gather, scatter, broadcast); else 0
  std::uint32_t seq;      // the collective's sequence number (every rank numbers them alike)
  std::uint32_t tag;      // which message of that collective (a step of the algorithm)
  std::uint64_t total;    // bytes of the whole logical message
  std::uint64_t offset;   // where this fragment's payload starts in it
};
static_assert(sizeof(PeerHeader) == 40, "peer header layout is part of the wire format");

// What a collective is, as every rank must agree: its kind (7 bits), algorithm, dtype and
// reduction (8 bits each; a kind, an algorithm, a dtype or an op a peer does not share changes
// it). A data fragment whose signature or root is not the receiver's own for that collective is
// a mismatch across ranks: two ranks would otherwise exchange the same byte counts (an f16 and an
// f32 allreduce send fp32 partial sums alike) and sum garbage without a word. Never 0.
inline constexpr std::uint32_t collective_signature(std::uint8_t kind, std::uint8_t algo, std::uint8_t dtype,
                                                    std::uint8_t op) noexcept {
  return 0x80000000u | std::uint32_t{kind & 0x7fu} << 24 | std::uint32_t{algo} << 16 | std::uint32_t{dtype} << 8 | op;
}

// A logical message larger than this is not something any algorithm sends: treat it as corrupt.
inline constexpr std::uint64_t kMaxLogicalBytes = std::uint64_t{1} << 44;
// An abort's reason is cut to this many bytes before it reaches a log or an error message.
inline constexpr std::size_t kMaxAbortReasonBytes = 1024;

// What parse_peer_message found wrong with a message's bytes (who sent it is checked by Peers).
enum class PeerParse : std::uint8_t {
  ok,
  too_short,  // shorter than the header
  bad_magic,  // magic or version
  bad_kind,   // neither data, abort nor p2p
  bad_range,  // data, p2p: total above kMaxLogicalBytes, or the fragment not inside [0, total)
};

// One received message, split into its header and its payload (pointing into the message).
struct PeerMessage {
  PeerHeader header{};
  const std::byte* payload = nullptr;
  std::size_t len = 0;
};

// Checks what can be checked from the bytes alone, in the order Peers reports them. `out` holds
// the header whenever the message is at least a header long (error messages quote it), and the
// payload when the result is ok. An abort's range is not checked: its payload is only text.
// Never reads outside [data, data + size).
PeerParse parse_peer_message(const std::byte* data, std::size_t size, PeerMessage* out) noexcept;

// An abort's reason as it may go into logs: at most kMaxAbortReasonBytes, every byte outside
// printable ASCII replaced by '?' (a hostile peer's text).
std::string abort_reason_text(const std::byte* payload, std::size_t len);

}  // namespace sparcoll::p2p
