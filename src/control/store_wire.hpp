// Encoding and decoding of the rendezvous store protocol (described at the top of store.cpp).
// Every byte a store client or server receives goes through the decoders here, which check
// lengths and bounds before anything else looks at it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "sparcoll/status.hpp"

namespace sparcoll::control::wire {

constexpr std::uint32_t kMagic = 0x54534353;  // "SCST" as little-endian bytes
constexpr std::uint16_t kVersion = 1;

constexpr std::size_t kMaxKeyBytes = 4 * 1024;
constexpr std::size_t kMaxValueBytes = 16 * 1024 * 1024;
constexpr std::size_t kMaxTokenBytes = 4 * 1024;
constexpr std::size_t kMaxIdentityBytes = 256;
constexpr std::size_t kMaxReasonBytes = 4 * 1024;

// Largest frame bodies (after the 4-byte length). A hello is small, so a peer that has not
// authenticated cannot make the server buffer more than this.
constexpr std::size_t kMaxHelloBody = 1 + 4 + 2 + 4 + kMaxTokenBytes + 4 + kMaxIdentityBytes;
constexpr std::size_t kMaxRequestBody = 1 + 8 + 4 + kMaxKeyBytes + 4 + kMaxValueBytes;
constexpr std::size_t kMaxReplyBody = 1 + 8 + 4 + 4 + kMaxValueBytes;

enum class MsgType : std::uint8_t {
  hello = 1,
  set = 2,
  get = 3,
  add = 4,
  wait_at_least = 5,
  reply = 6,
  diagnose = 7,  // laid out as get; answered with the server's notes on rejected clients
};

struct Hello {
  std::uint32_t magic = kMagic;
  std::uint16_t version = kVersion;
  std::string token;
  std::string identity;
};

struct Request {
  MsgType type = MsgType::get;
  std::uint64_t id = 0;
  std::string key;
  std::string value;        // set
  std::int64_t number = 0;  // add: delta; wait_at_least: target
};

// code 0: success, data is the value (get), the new integer as 8 bytes (add) or empty;
// otherwise an ErrorCode and data is the message.
struct Reply {
  std::uint64_t id = 0;
  std::uint32_t code = 0;
  std::string data;
};

// Whole frames, length prefix included, ready to send.
std::string encode(const Hello& hello);
std::string encode(const Request& request);
std::string encode(const Reply& reply);

// Locates the first frame in `buffered`. Returns ok with the body and the bytes the
// frame occupies, incomplete when more bytes are needed, or too_large when the announced
// length exceeds max_body (the stream cannot be trusted after that).
enum class FrameState { ok, incomplete, too_large };
FrameState next_frame(std::string_view buffered, std::size_t max_body, std::string_view* body,
                      std::size_t* consumed, std::size_t* announced);

// Errors are protocol_error with a message saying which field is wrong.
Status decode(std::string_view body, Hello* out);
Status decode(std::string_view body, Request* out);
Status decode(std::string_view body, Reply* out);

// 8-byte little-endian integers inside reply data (add results).
std::string encode_i64(std::int64_t value);
bool decode_i64(std::string_view data, std::int64_t* out);

}  // namespace sparcoll::control::wire
