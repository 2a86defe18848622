// Bytes on a tcp driver connection. All integers little-endian.
//
// Handshake, once per connection (the lower process index connects, see tcp_setup.hpp):
//   hello  = HandshakeHeader{kind = hello, process = connector, channel, code = 0, token_len}
//            followed by token_len bytes of job token (at most kMaxTokenBytes)
//   answer = HandshakeHeader{kind = accept | reject, process = acceptor, channel, code, 0}
//            code is 0 for accept, an ErrorCode for reject (auth_failure: wrong job token)
// Then a stream of frames: FrameHeader{len, 0} followed by len payload bytes and zero padding
// to a multiple of 8, so every payload lands 8-byte aligned in the receive buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace sparcoll::transport::tcp {

inline constexpr std::uint32_t kHandshakeMagic = 0x48544353;  // "SCTH"
inline constexpr std::uint16_t kHandshakeVersion = 1;
inline constexpr std::uint32_t kMaxTokenBytes = 4096;

enum class HandshakeKind : std::uint16_t { hello = 1, accept = 2, reject = 3 };

struct HandshakeHeader {
  HandshakeKind kind = HandshakeKind::hello;
  std::uint32_t process = 0;
  std::uint32_t channel = 0;
  std::uint32_t code = 0;
  std::uint32_t token_len = 0;
};

inline constexpr std::size_t kHandshakeHeaderBytes = 24;  // magic u32 | version u16 | kind u16 | 4 x u32

// Encodes a header (and for a hello, the token after it).
std::string encode_handshake(const HandshakeHeader& header, std::string_view token = {});
// Decodes the fixed part. Returns nullptr on success, else a lowercase reason for the log
// (bad magic, unknown version or kind, token too long).
const char* decode_handshake(const std::byte* bytes, HandshakeHeader* out);

struct FrameHeader {
  std::uint32_t len;       // payload bytes
  std::uint32_t reserved;  // 0; anything else means the stream is corrupt
};
static_assert(sizeof(FrameHeader) == 8, "frames keep payloads 8-byte aligned");

constexpr std::uint64_t frame_bytes(std::uint64_t len) { return sizeof(FrameHeader) + ((len + 7) & ~std::uint64_t{7}); }

// What the bytes at the start of a receive buffer hold.
enum class FrameCheck : std::uint8_t {
  ok,            // a whole frame: frame_bytes(*len) bytes, payload after the header
  incomplete,    // not a whole frame yet
  bad_reserved,  // the header's reserved word is not 0: the stream is corrupt
  too_large,     // the header announces more than max_message payload bytes (*len says how many)
};
// Checks the frame that starts at `at`, of which `available` bytes are buffered. Never reads
// past at + available.
FrameCheck check_frame(const std::byte* at, std::size_t available, std::uint32_t max_message, std::uint32_t* len);

}  // namespace sparcoll::transport::tcp
