#include "tcp_wire.hpp"

#include <endian.h>

#include <cstring>

namespace sparcoll::transport::tcp {
namespace {

void put32(std::string* out, std::uint32_t value) {
  value = htole32(value);
  out->append(reinterpret_cast<const char*>(&value), 4);
}
void put16(std::string* out, std::uint16_t value) {
  value = htole16(value);
  out->append(reinterpret_cast<const char*>(&value), 2);
}
std::uint32_t get32(const std::byte* at) {
  std::uint32_t value;
  std::memcpy(&value, at, 4);
  return le32toh(value);
}
std::uint16_t get16(const std::byte* at) {
  std::uint16_t value;
  std::memcpy(&value, at, 2);
  return le16toh(value);
}

}  // namespace

std::string encode_handshake(const HandshakeHeader& header, std::string_view token) {
  std::string out;
  out.reserve(kHandshakeHeaderBytes + token.size());
  put32(&out, kHandshakeMagic);
  put16(&out, kHandshakeVersion);
  put16(&out, static_cast<std::uint16_t>(header.kind));
  put32(&out, header.process);
  put32(&out, header.channel);
  put32(&out, header.code);
  put32(&out, static_cast<std::uint32_t>(token.size()));
  out.append(token);
  return out;
}

const char* decode_handshake(const std::byte* bytes, HandshakeHeader* out) {
  if (get32(bytes) != kHandshakeMagic) return "bad magic";
  if (get16(bytes + 4) != kHandshakeVersion) return "unknown handshake version";
  const std::uint16_t kind = get16(bytes + 6);
  if (kind < static_cast<std::uint16_t>(HandshakeKind::hello) || kind > static_cast<std::uint16_t>(HandshakeKind::reject))
    return "unknown handshake kind";
  HandshakeHeader header;
  header.kind = static_cast<HandshakeKind>(kind);
  header.process = get32(bytes + 8);
  header.channel = get32(bytes + 12);
  header.code = get32(bytes + 16);
  header.token_len = get32(bytes + 20);
  if (header.token_len > kMaxTokenBytes) return "job token longer than 4096 bytes";
  if (header.kind != HandshakeKind::hello && header.token_len != 0) return "token in a handshake answer";
  *out = header;
  return nullptr;
}

FrameCheck check_frame(const std::byte* at, std::size_t available, std::uint32_t max_message, std::uint32_t* len) {
  if (available < sizeof(FrameHeader)) return FrameCheck::incomplete;
  FrameHeader header;
  std::memcpy(&header, at, sizeof header);
  if (header.reserved != 0) return FrameCheck::bad_reserved;
  *len = le32toh(header.len);
  if (*len > max_message) return FrameCheck::too_large;
  if (available < frame_bytes(*len)) return FrameCheck::incomplete;
  return FrameCheck::ok;
}

}  // namespace sparcoll::transport::tcp
