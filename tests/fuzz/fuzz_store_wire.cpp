// Fuzz target: the rendezvous store's wire format (src/control/store_wire.cpp): next_frame, which
// cuts a TCP byte stream into frames, and the Hello, Request and Reply decoders that every byte
// a store server or client receives goes through.
//
// 1. The input, as the bytes a server receives on one connection: frames are cut the way the
//    server does (a hello first, limited to kMaxHelloBody, then requests); every body is given
//    to all three decoders. Checks: the length prefix is what the 4 bytes say, a frame is cut
//    only when whole and within its limit, the body lies inside the stream; a decoded message
//    keeps every field within its limit, and encoding it again gives back exactly the frame's
//    bytes (the format has one encoding per message, so a decoder that skipped or misread a
//    byte shows up here).
// 2. The same bytes as choices for a Hello, a Request and a Reply: encode, cut, decode, equal.
#include <fuzzer/FuzzedDataProvider.h>

#include <string>
#include <string_view>

#include "control/store_wire.hpp"
#include "fuzz_check.hpp"

namespace sparcoll::fuzz {
namespace {

namespace wire = control::wire;

std::uint32_t le32(std::string_view s) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(static_cast<unsigned char>(s[i])) << (8 * i);
  return v;
}

// Every decoder on one body; an accepted message must encode back to `frame`.
void decode_body(std::string_view frame, std::string_view body) {
  wire::Hello hello;
  if (wire::decode(body, &hello).ok()) {
    FUZZ_CHECK(hello.token.size() <= wire::kMaxTokenBytes && hello.identity.size() <= wire::kMaxIdentityBytes);
    FUZZ_CHECK(wire::encode(hello) == frame);
  }
  wire::Request request;
  if (wire::decode(body, &request).ok()) {
    FUZZ_CHECK(request.type == wire::MsgType::set || request.type == wire::MsgType::get ||
               request.type == wire::MsgType::add || request.type == wire::MsgType::wait_at_least ||
               request.type == wire::MsgType::diagnose);
    FUZZ_CHECK(!request.key.empty() && request.key.size() <= wire::kMaxKeyBytes);
    FUZZ_CHECK(request.value.size() <= wire::kMaxValueBytes);
    FUZZ_CHECK(request.type == wire::MsgType::set || request.value.empty());
    FUZZ_CHECK(wire::encode(request) == frame);
  }
  wire::Reply reply;
  if (wire::decode(body, &reply).ok()) {
    FUZZ_CHECK(reply.data.size() <= wire::kMaxValueBytes);
    FUZZ_CHECK(wire::encode(reply) == frame);
    std::int64_t number = 0;
    if (wire::decode_i64(reply.data, &number)) FUZZ_CHECK(wire::encode_i64(number) == reply.data);
  }
  // A failed decode must say why (the server logs it and drops the client).
  const Status st = wire::decode(body, &request);
  FUZZ_CHECK(st.ok() || (st.code() == ErrorCode::protocol_error && !st.message().empty()));
}

void cut_stream(const std::uint8_t* bytes, std::size_t size) {
  const ExactCopy copy(bytes, size);
  std::string_view rest(reinterpret_cast<const char*>(copy.data()), copy.size());
  bool first = true;
  for (;;) {
    const std::size_t max_body = first ? wire::kMaxHelloBody : wire::kMaxRequestBody;
    std::string_view body;
    std::size_t consumed = 0, announced = 0;
    const wire::FrameState state = wire::next_frame(rest, max_body, &body, &consumed, &announced);
    if (rest.size() < 4) {
      FUZZ_CHECK(state == wire::FrameState::incomplete);
      return;
    }
    FUZZ_CHECK(announced == le32(rest));
    if (state == wire::FrameState::too_large) {
      FUZZ_CHECK(announced > max_body);
      return;
    }
    FUZZ_CHECK(announced <= max_body);
    if (state == wire::FrameState::incomplete) {
      FUZZ_CHECK(rest.size() - 4 < announced);
      return;
    }
    FUZZ_CHECK(consumed == 4 + announced && consumed <= rest.size());
    FUZZ_CHECK(body.data() == rest.data() + 4 && body.size() == announced);
    touch(body.data(), body.size());
    decode_body(rest.substr(0, consumed), body);
    rest.remove_prefix(consumed);
    first = false;
  }
}

std::string_view cut_whole(const std::string& frame, std::size_t max_body) {
  std::string_view body;
  std::size_t consumed = 0, announced = 0;
  FUZZ_CHECK(wire::next_frame(frame, max_body, &body, &consumed, &announced) == wire::FrameState::ok);
  FUZZ_CHECK(consumed == frame.size());
  // Any strict prefix is incomplete.
  std::string_view ignored;
  FUZZ_CHECK(wire::next_frame(std::string_view(frame).substr(0, frame.size() - 1), max_body, &ignored, &consumed,
                              &announced) == wire::FrameState::incomplete);
  return body;
}

void round_trip(FuzzedDataProvider& in) {
  wire::Hello hello;
  hello.magic = in.ConsumeBool() ? wire::kMagic : in.ConsumeIntegral<std::uint32_t>();
  hello.version = in.ConsumeIntegral<std::uint16_t>();
  hello.token = in.ConsumeRandomLengthString(wire::kMaxTokenBytes);
  hello.identity = in.ConsumeRandomLengthString(wire::kMaxIdentityBytes);
  const std::string hello_frame = wire::encode(hello);
  wire::Hello hello_back;
  FUZZ_CHECK(wire::decode(cut_whole(hello_frame, wire::kMaxHelloBody), &hello_back).ok());
  FUZZ_CHECK(hello_back.magic == hello.magic && hello_back.version == hello.version &&
             hello_back.token == hello.token && hello_back.identity == hello.identity);

  wire::Request request;
  request.type = static_cast<wire::MsgType>(in.ConsumeIntegralInRange<std::uint8_t>(2, 5));
  request.id = in.ConsumeIntegral<std::uint64_t>();
  request.key = in.ConsumeRandomLengthString(wire::kMaxKeyBytes);
  if (request.type == wire::MsgType::set) request.value = in.ConsumeRandomLengthString(8192);
  if (request.type == wire::MsgType::add || request.type == wire::MsgType::wait_at_least)
    request.number = in.ConsumeIntegral<std::int64_t>();
  const std::string request_frame = wire::encode(request);
  wire::Request request_back;
  const Status st = wire::decode(cut_whole(request_frame, wire::kMaxRequestBody), &request_back);
  FUZZ_CHECK(st.ok() == !request.key.empty());  // an empty key is the one thing refused
  if (st.ok()) {
    FUZZ_CHECK(request_back.type == request.type && request_back.id == request.id && request_back.key == request.key &&
               request_back.value == request.value && request_back.number == request.number);
  }

  wire::Reply reply;
  reply.id = in.ConsumeIntegral<std::uint64_t>();
  reply.code = in.ConsumeIntegral<std::uint32_t>();
  reply.data = in.ConsumeBool() ? wire::encode_i64(in.ConsumeIntegral<std::int64_t>()) : in.ConsumeRandomLengthString(8192);
  const std::string reply_frame = wire::encode(reply);
  wire::Reply reply_back;
  FUZZ_CHECK(wire::decode(cut_whole(reply_frame, wire::kMaxReplyBody), &reply_back).ok());
  FUZZ_CHECK(reply_back.id == reply.id && reply_back.code == reply.code && reply_back.data == reply.data);
}

}  // namespace
}  // namespace sparcoll::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  sparcoll::fuzz::cut_stream(data, size);
  FuzzedDataProvider in(data, size);
  sparcoll::fuzz::round_trip(in);
  return 0;
}
