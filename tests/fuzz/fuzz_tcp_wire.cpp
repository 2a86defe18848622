// Fuzz target: the tcp driver's framing (drivers/tcp/tcp_wire.cpp, tcp_channel.cpp): the
// connection handshake (decode_handshake) and the data frames' length prefix (check_frame), as
// parsed by a real TcpChannel.
//
// The input is what a peer sends on one connection: a 24-byte handshake header and its token,
// then the frame stream (when the handshake is refused, the whole input is taken as frames).
// 1. Handshake: the verdict must be the one the layout in tcp_wire.hpp implies (a reference
//    check written here), an accepted header re-encodes to the same 24 bytes.
// 2. Frames, with check_frame over an exact copy of the stream: an ok frame lies inside the
//    bytes and within max_message, an incomplete one is really short, an error is really one.
// 3. The same stream written into a socket read by a TcpChannel (the peer then closes it): the
//    channel must hand out exactly the frames of step 2, in order, byte for byte, then fail with
//    the error step 2 predicts (a corrupt header or oversized frame: protocol_error; a frame cut
//    off: "closed the connection in the middle of a message"; otherwise a clean close).
// 4. The same bytes as choices for a valid handshake and frame, encoded: decoded back equal.
#include <fuzzer/FuzzedDataProvider.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_check.hpp"
#include "fuzz_params.hpp"
#include "tcp_channel.hpp"
#include "tcp_wire.hpp"

namespace sparcoll::fuzz {
namespace {

namespace tcp = transport::tcp;

constexpr std::uint32_t kMaxMessage = kTcpMaxMessage;
// The channel stage writes the stream into a socket before reading it: stay within its buffer.
constexpr std::size_t kMaxChannelStream = 64 * 1024;

std::uint32_t le32(const std::byte* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;  // little-endian host (the build refuses others)
}
std::uint16_t le16(const std::byte* p) {
  std::uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// 1. Returns where the frames start.
std::size_t check_handshake(const ExactCopy& input) {
  if (input.size() < tcp::kHandshakeHeaderBytes) return 0;
  const ExactCopy header_bytes(input.data(), tcp::kHandshakeHeaderBytes);
  tcp::HandshakeHeader h;
  const char* problem = tcp::decode_handshake(header_bytes.data(), &h);
  const std::byte* p = header_bytes.data();
  const std::uint16_t kind = le16(p + 6);
  const std::uint32_t token_len = le32(p + 20);
  const bool valid = le32(p) == tcp::kHandshakeMagic && le16(p + 4) == tcp::kHandshakeVersion && kind >= 1 &&
                     kind <= 3 && token_len <= tcp::kMaxTokenBytes && (kind == 1 || token_len == 0);
  FUZZ_CHECK((problem == nullptr) == valid);
  if (problem != nullptr) {
    FUZZ_CHECK(std::strlen(problem) > 0);
    return 0;
  }
  FUZZ_CHECK(static_cast<std::uint16_t>(h.kind) == kind && h.token_len == token_len);
  FUZZ_CHECK(h.process == le32(p + 8) && h.channel == le32(p + 12) && h.code == le32(p + 16));
  const std::string again = tcp::encode_handshake(h, std::string(h.token_len, 't'));
  FUZZ_CHECK(again.size() == tcp::kHandshakeHeaderBytes + h.token_len);
  FUZZ_CHECK(std::memcmp(again.data(), p, tcp::kHandshakeHeaderBytes) == 0);
  return std::min<std::size_t>(input.size(), tcp::kHandshakeHeaderBytes + h.token_len);
}

struct Frame {
  std::size_t offset;  // of the payload, in the stream
  std::uint32_t len;
};
enum class StreamEnd { clean, partial, bad_reserved, too_large };

// 2. The frames of the stream as check_frame cuts them, and how the stream ends.
StreamEnd cut_frames(const ExactCopy& stream, std::vector<Frame>* frames) {
  std::size_t at = 0;
  for (;;) {
    const std::size_t available = stream.size() - at;
    std::uint32_t len = 0;
    const tcp::FrameCheck check = tcp::check_frame(stream.data() + at, available, kMaxMessage, &len);
    if (check == tcp::FrameCheck::incomplete) {
      if (available >= sizeof(tcp::FrameHeader)) {
        FUZZ_CHECK(le32(stream.data() + at + 4) == 0 && le32(stream.data() + at) <= kMaxMessage);
        FUZZ_CHECK(available < tcp::frame_bytes(le32(stream.data() + at)));
      }
      return available == 0 ? StreamEnd::clean : StreamEnd::partial;
    }
    FUZZ_CHECK(available >= sizeof(tcp::FrameHeader));
    if (check == tcp::FrameCheck::bad_reserved) {
      FUZZ_CHECK(le32(stream.data() + at + 4) != 0);
      return StreamEnd::bad_reserved;
    }
    FUZZ_CHECK(len == le32(stream.data() + at));
    if (check == tcp::FrameCheck::too_large) {
      FUZZ_CHECK(len > kMaxMessage);
      return StreamEnd::too_large;
    }
    const std::uint64_t bytes = tcp::frame_bytes(len);
    FUZZ_CHECK(len <= kMaxMessage && bytes % 8 == 0 && bytes >= sizeof(tcp::FrameHeader) + len && bytes <= available);
    touch(stream.data() + at + sizeof(tcp::FrameHeader), len);
    frames->push_back(Frame{at + sizeof(tcp::FrameHeader), len});
    at += bytes;
  }
}

// 3. A TcpChannel reading the stream from a socket whose other end then closes.
void run_channel(const ExactCopy& stream, const std::vector<Frame>& frames, StreamEnd end) {
  if (stream.size() > kMaxChannelStream) return;
  int fds[2];
  FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
  std::size_t written = 0;
  while (written < stream.size()) {
    const ssize_t n = write(fds[1], stream.data() + written, stream.size() - written);
    FUZZ_CHECK(n > 0);
    written += static_cast<std::size_t>(n);
  }
  close(fds[1]);
  std::vector<tcp::PeerConnection> peers(1);
  peers[0].index = 1;
  peers[0].label = "rank 1";
  peers[0].fd = fds[0];
  std::unique_ptr<tcp::TcpChannel> channel;
  FUZZ_CHECK(tcp::TcpChannel::create(0, kMaxMessage, 2, std::move(peers), &channel).ok());

  std::size_t next = 0;
  transport::ReceivedMessage got[8];
  for (int round = 0;; ++round) {
    FUZZ_CHECK(round < 10000);  // the channel must come to an end
    const int n = channel->poll(got, 8);
    if (n < 0) break;
    for (int i = 0; i < n; ++i) {
      FUZZ_CHECK(next < frames.size());
      const Frame& f = frames[next++];
      FUZZ_CHECK(got[i].peer == 1 && got[i].size == f.len);
      FUZZ_CHECK(reinterpret_cast<std::uintptr_t>(got[i].data) % 8 == 0);
      FUZZ_CHECK(f.len == 0 || std::memcmp(got[i].data, stream.data() + f.offset, f.len) == 0);
    }
  }
  FUZZ_CHECK(next == frames.size());
  const Status& error = channel->error();
  const std::string& text = error.message();
  switch (end) {
    case StreamEnd::bad_reserved:
      FUZZ_CHECK(error.code() == ErrorCode::protocol_error && text.find("malformed frame header") != std::string::npos);
      break;
    case StreamEnd::too_large:
      FUZZ_CHECK(error.code() == ErrorCode::protocol_error && text.find("above the max message") != std::string::npos);
      break;
    case StreamEnd::partial:
      FUZZ_CHECK(error.code() == ErrorCode::peer_failure && text.find("in the middle of a message") != std::string::npos);
      break;
    case StreamEnd::clean:
      FUZZ_CHECK(error.code() == ErrorCode::peer_failure && text.find("closed the connection") != std::string::npos &&
                 text.find("middle") == std::string::npos);
      break;
  }
}

// 4.
void round_trip(FuzzedDataProvider& in) {
  tcp::HandshakeHeader h;
  h.kind = static_cast<tcp::HandshakeKind>(in.ConsumeIntegralInRange<std::uint16_t>(1, 3));
  h.process = in.ConsumeIntegral<std::uint32_t>();
  h.channel = in.ConsumeIntegral<std::uint32_t>();
  h.code = in.ConsumeIntegral<std::uint32_t>();
  const std::string token = h.kind == tcp::HandshakeKind::hello ? in.ConsumeRandomLengthString(tcp::kMaxTokenBytes) : "";
  const std::string bytes = tcp::encode_handshake(h, token);
  FUZZ_CHECK(bytes.size() == tcp::kHandshakeHeaderBytes + token.size());
  const ExactCopy header_bytes(bytes.data(), tcp::kHandshakeHeaderBytes);
  tcp::HandshakeHeader back;
  FUZZ_CHECK(tcp::decode_handshake(header_bytes.data(), &back) == nullptr);
  FUZZ_CHECK(back.kind == h.kind && back.process == h.process && back.channel == h.channel && back.code == h.code &&
             back.token_len == token.size());
  FUZZ_CHECK(bytes.compare(tcp::kHandshakeHeaderBytes, std::string::npos, token) == 0);

  // A frame as TcpChannel::send writes it: header, payload, zero padding to 8.
  const auto len = in.ConsumeIntegralInRange<std::uint32_t>(0, kMaxMessage);
  std::vector<std::byte> frame(tcp::frame_bytes(len));
  const tcp::FrameHeader fh{len, 0};
  std::memcpy(frame.data(), &fh, sizeof fh);
  for (std::uint32_t i = 0; i < len; ++i) frame[sizeof fh + i] = static_cast<std::byte>(i * 7);
  const ExactCopy whole(frame.data(), frame.size());
  std::uint32_t got = 0;
  FUZZ_CHECK(tcp::check_frame(whole.data(), whole.size(), kMaxMessage, &got) == tcp::FrameCheck::ok && got == len);
  const std::size_t cut = in.ConsumeIntegralInRange<std::size_t>(0, frame.size() - 1);
  const ExactCopy part(frame.data(), cut);
  FUZZ_CHECK(tcp::check_frame(part.data(), part.size(), kMaxMessage, &got) == tcp::FrameCheck::incomplete);
}

}  // namespace
}  // namespace sparcoll::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace sparcoll::fuzz;
  const ExactCopy input(data, size);
  const std::size_t start = check_handshake(input);
  const ExactCopy stream(input.data() + start, input.size() - start);
  std::vector<Frame> frames;
  const StreamEnd end = cut_frames(stream, &frames);
  run_channel(stream, frames, end);
  FuzzedDataProvider in(data, size);
  round_trip(in);
  return 0;
}
