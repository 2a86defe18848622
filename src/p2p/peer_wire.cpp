#include "p2p/peer_wire.hpp"

#include <algorithm>
#include <cstring>

namespace sparcoll::p2p {

PeerParse parse_peer_message(const std::byte* data, std::size_t size, PeerMessage* out) noexcept {
  if (size < sizeof(PeerHeader)) return PeerParse::too_short;
  // Copied out: transports align payloads to 8 bytes, but nothing here relies on it.
  std::memcpy(&out->header, data, sizeof(PeerHeader));
  const PeerHeader& h = out->header;
  const std::size_t len = size - sizeof(PeerHeader);
  if (h.magic != kPeerMagic || h.version != kPeerVersion) return PeerParse::bad_magic;
  if (h.kind == static_cast<std::uint8_t>(PeerKind::data) || h.kind == static_cast<std::uint8_t>(PeerKind::p2p)) {
    if (h.total > kMaxLogicalBytes || h.offset > h.total || len > h.total - h.offset) return PeerParse::bad_range;
  } else if (h.kind != static_cast<std::uint8_t>(PeerKind::abort)) {
    return PeerParse::bad_kind;
  }
  out->payload = data + sizeof(PeerHeader);
  out->len = len;
  return PeerParse::ok;
}

std::string abort_reason_text(const std::byte* payload, std::size_t len) {
  std::string reason(reinterpret_cast<const char*>(payload), std::min<std::size_t>(len, kMaxAbortReasonBytes));
  for (char& c : reason)
    if (c < 32 || c > 126) c = '?';  // a hostile peer's text goes into our logs
  return reason;
}

}  // namespace sparcoll::p2p
