// Fuzz target: the point-to-point message parser of the collective thread
// (p2p::parse_peer_message, abort_reason_text in src/coll/peer_wire.cpp),
// which every ring, butterfly, SparCML, Ok-Topk, broadcast and allgather fragment goes through.
//
// 1. The input, as a received message: the verdict must be exactly the one the layout in
//    peer_wire.hpp implies (a reference check written here from the header's field meanings),
//    the header copied verbatim, an accepted data fragment inside its logical message
//    (offset + len <= total <= 2^44) with the payload inside the input, and an abort's reason
//    printable, at most 1024 bytes, the sender's bytes where they were printable.
// 2. The same bytes as choices for a valid fragment or abort, encoded as Peers encodes them:
//    parsed back to the same header and payload.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstring>
#include <vector>

#include "p2p/peer_wire.hpp"
#include "fuzz_check.hpp"

namespace sparcoll::fuzz {
namespace {

using p2p::PeerHeader;
using p2p::PeerKind;
using p2p::PeerMessage;
using p2p::PeerParse;

// What the verdict must be, from the header's documented meaning alone.
PeerParse expected_verdict(const std::byte* data, std::size_t size) {
  if (size < sizeof(PeerHeader)) return PeerParse::too_short;
  PeerHeader h;
  std::memcpy(&h, data, sizeof h);
  if (h.magic != p2p::kPeerMagic || h.version != p2p::kPeerVersion) return PeerParse::bad_magic;
  if (h.kind == static_cast<std::uint8_t>(PeerKind::abort)) return PeerParse::ok;
  if (h.kind != static_cast<std::uint8_t>(PeerKind::data) && h.kind != static_cast<std::uint8_t>(PeerKind::p2p))
    return PeerParse::bad_kind;
  const std::size_t len = size - sizeof h;
  // In 128-bit arithmetic, so the reference itself cannot wrap.
  const unsigned __int128 end = static_cast<unsigned __int128>(h.offset) + len;
  if (h.total > p2p::kMaxLogicalBytes || end > h.total) return PeerParse::bad_range;
  return PeerParse::ok;
}

void check_reason(const PeerMessage& m) {
  const std::string reason = p2p::abort_reason_text(m.payload, m.len);
  FUZZ_CHECK(reason.size() == std::min(m.len, p2p::kMaxAbortReasonBytes));
  for (std::size_t i = 0; i < reason.size(); ++i) {
    const char c = reason[i];
    const char original = static_cast<char>(m.payload[i]);
    FUZZ_CHECK(c >= 32 && c <= 126);
    FUZZ_CHECK(c == original || (c == '?' && (original < 32 || original > 126)));
  }
}

void parse_raw(const std::uint8_t* bytes, std::size_t size) {
  const ExactCopy copy(bytes, size);
  PeerMessage m;
  const PeerParse got = p2p::parse_peer_message(copy.data(), copy.size(), &m);
  FUZZ_CHECK(got == expected_verdict(copy.data(), copy.size()));
  if (got == PeerParse::too_short) return;
  FUZZ_CHECK(std::memcmp(&m.header, copy.data(), sizeof(PeerHeader)) == 0);
  if (got != PeerParse::ok) return;
  FUZZ_CHECK(m.payload == copy.data() + sizeof(PeerHeader) && m.len == copy.size() - sizeof(PeerHeader));
  touch(m.payload, m.len);
  if (m.header.kind == static_cast<std::uint8_t>(PeerKind::abort)) {
    check_reason(m);
  } else {
    FUZZ_CHECK(m.header.total <= p2p::kMaxLogicalBytes);
    FUZZ_CHECK(m.header.offset <= m.header.total && m.len <= m.header.total - m.header.offset);
  }
}

void round_trip(FuzzedDataProvider& in) {
  PeerHeader h{p2p::kPeerMagic, p2p::kPeerVersion, 0, 0, in.ConsumeIntegral<std::uint32_t>(),
               in.ConsumeIntegral<std::uint32_t>(), in.ConsumeIntegral<std::uint32_t>(),
               in.ConsumeIntegral<std::uint32_t>(), 0, 0};
  std::vector<std::byte> payload;
  if (in.ConsumeBool()) {
    h.kind = static_cast<std::uint8_t>(in.ConsumeBool() ? PeerKind::data : PeerKind::p2p);
    h.total = in.ConsumeIntegralInRange<std::uint64_t>(0, p2p::kMaxLogicalBytes);
    h.offset = in.ConsumeIntegralInRange<std::uint64_t>(0, h.total);
    payload.resize(in.ConsumeIntegralInRange<std::size_t>(0, std::min<std::uint64_t>(h.total - h.offset, 4096)));
  } else {
    h.kind = static_cast<std::uint8_t>(PeerKind::abort);
    const std::string text = in.ConsumeRandomLengthString(2048);
    h.total = text.size();
    payload.resize(text.size());
    if (!text.empty()) std::memcpy(payload.data(), text.data(), text.size());
  }
  std::vector<std::byte> message(sizeof h + payload.size());
  std::memcpy(message.data(), &h, sizeof h);
  if (!payload.empty()) std::memcpy(message.data() + sizeof h, payload.data(), payload.size());
  const ExactCopy copy(message.data(), message.size());
  PeerMessage m;
  FUZZ_CHECK(p2p::parse_peer_message(copy.data(), copy.size(), &m) == PeerParse::ok);
  FUZZ_CHECK(std::memcmp(&m.header, &h, sizeof h) == 0);
  FUZZ_CHECK(m.len == payload.size() && (m.len == 0 || std::memcmp(m.payload, payload.data(), m.len) == 0));
  if (h.kind == static_cast<std::uint8_t>(PeerKind::abort)) check_reason(m);
}

}  // namespace
}  // namespace sparcoll::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  sparcoll::fuzz::parse_raw(data, size);
  FuzzedDataProvider in(data, size);
  sparcoll::fuzz::round_trip(in);
  return 0;
}
