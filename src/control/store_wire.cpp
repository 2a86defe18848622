#include "control/store_wire.hpp"

namespace sparcoll::control::wire {
namespace {

// Appends little-endian integers and length-prefixed strings to a frame under construction.
class Writer {
 public:
  explicit Writer(MsgType type) {
    buf_.resize(4);  // length, patched by finish()
    u8(static_cast<std::uint8_t>(type));
  }
  void u8(std::uint8_t v) { buf_.push_back(static_cast<char>(v)); }
  void u16(std::uint16_t v) { put(v, 2); }
  void u32(std::uint32_t v) { put(v, 4); }
  void u64(std::uint64_t v) { put(v, 8); }
  void str(std::string_view s) {
    u32(static_cast<std::uint32_t>(s.size()));
    buf_.append(s);
  }
  std::string finish() {
    const auto body = static_cast<std::uint32_t>(buf_.size() - 4);
    for (int i = 0; i < 4; ++i) buf_[i] = static_cast<char>((body >> (8 * i)) & 0xff);
    return std::move(buf_);
  }

 private:
  void put(std::uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) buf_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  std::string buf_;
};

// Reads fields in order; the first failure is kept and every later read is a no-op, so a
// decoder reads all fields and checks status() once.
class Reader {
 public:
  explicit Reader(std::string_view body) : rest_(body) {}

  std::uint64_t uint(int bytes, const char* field) {
    if (!status_.ok()) return 0;
    if (rest_.size() < static_cast<std::size_t>(bytes)) {
      fail(std::string("frame ends inside field '") + field + "'");
      return 0;
    }
    std::uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= static_cast<std::uint64_t>(static_cast<unsigned char>(rest_[i])) << (8 * i);
    rest_.remove_prefix(bytes);
    return v;
  }
  std::string str(std::size_t max, const char* field) {
    const auto len = uint(4, field);
    if (!status_.ok()) return {};
    if (len > max) {
      fail(std::string("field '") + field + "' of " + std::to_string(len) + " bytes exceeds the " +
           std::to_string(max) + "-byte limit");
      return {};
    }
    if (rest_.size() < len) {
      fail(std::string("frame ends inside field '") + field + "'");
      return {};
    }
    std::string s(rest_.substr(0, len));
    rest_.remove_prefix(len);
    return s;
  }
  // Call after the last field: trailing bytes mean the peer and we disagree on the format.
  Status finish() {
    if (status_.ok() && !rest_.empty()) fail(std::to_string(rest_.size()) + " unexpected bytes after the last field");
    return status_;
  }

 private:
  void fail(std::string what) { status_ = Status(ErrorCode::protocol_error, std::move(what)); }
  std::string_view rest_;
  Status status_;
};

bool is_request_type(std::uint64_t t) {
  return t == static_cast<std::uint8_t>(MsgType::set) || t == static_cast<std::uint8_t>(MsgType::get) ||
         t == static_cast<std::uint8_t>(MsgType::add) || t == static_cast<std::uint8_t>(MsgType::wait_at_least) ||
         t == static_cast<std::uint8_t>(MsgType::diagnose);
}

Status wrong_type(std::uint64_t got, const char* expected) {
  return Status(ErrorCode::protocol_error, "message type " + std::to_string(got) + " where " + expected + " was expected");
}

}  // namespace

std::string encode(const Hello& hello) {
  Writer w(MsgType::hello);
  w.u32(hello.magic);
  w.u16(hello.version);
  w.str(hello.token);
  w.str(hello.identity);
  return w.finish();
}

std::string encode(const Request& request) {
  Writer w(request.type);
  w.u64(request.id);
  w.str(request.key);
  switch (request.type) {
    case MsgType::set: w.str(request.value); break;
    case MsgType::add:
    case MsgType::wait_at_least: w.u64(static_cast<std::uint64_t>(request.number)); break;
    default: break;
  }
  return w.finish();
}

std::string encode(const Reply& reply) {
  Writer w(MsgType::reply);
  w.u64(reply.id);
  w.u32(reply.code);
  w.str(reply.data);
  return w.finish();
}

FrameState next_frame(std::string_view buffered, std::size_t max_body, std::string_view* body,
                      std::size_t* consumed, std::size_t* announced) {
  if (buffered.size() < 4) return FrameState::incomplete;
  std::size_t len = 0;
  for (int i = 0; i < 4; ++i) len |= static_cast<std::size_t>(static_cast<unsigned char>(buffered[i])) << (8 * i);
  *announced = len;
  if (len > max_body) return FrameState::too_large;
  if (buffered.size() - 4 < len) return FrameState::incomplete;
  *body = buffered.substr(4, len);
  *consumed = 4 + len;
  return FrameState::ok;
}

Status decode(std::string_view body, Hello* out) {
  Reader r(body);
  const auto type = r.uint(1, "type");
  if (type != static_cast<std::uint8_t>(MsgType::hello)) return wrong_type(type, "a hello");
  Hello h;
  h.magic = static_cast<std::uint32_t>(r.uint(4, "magic"));
  h.version = static_cast<std::uint16_t>(r.uint(2, "version"));
  h.token = r.str(kMaxTokenBytes, "job token");
  h.identity = r.str(kMaxIdentityBytes, "identity");
  Status st = r.finish();
  if (!st.ok()) return st;
  *out = std::move(h);
  return Status::Ok();
}

Status decode(std::string_view body, Request* out) {
  Reader r(body);
  const auto type = r.uint(1, "type");
  if (!is_request_type(type)) return wrong_type(type, "a request");
  Request q;
  q.type = static_cast<MsgType>(type);
  q.id = r.uint(8, "request id");
  q.key = r.str(kMaxKeyBytes, "key");
  if (q.type == MsgType::set) q.value = r.str(kMaxValueBytes, "value");
  if (q.type == MsgType::add || q.type == MsgType::wait_at_least) {
    q.number = static_cast<std::int64_t>(r.uint(8, q.type == MsgType::add ? "delta" : "target"));
  }
  Status st = r.finish();
  if (!st.ok()) return st;
  if (q.key.empty()) return Status(ErrorCode::protocol_error, "empty key");
  *out = std::move(q);
  return Status::Ok();
}

Status decode(std::string_view body, Reply* out) {
  Reader r(body);
  const auto type = r.uint(1, "type");
  if (type != static_cast<std::uint8_t>(MsgType::reply)) return wrong_type(type, "a reply");
  Reply p;
  p.id = r.uint(8, "request id");
  p.code = static_cast<std::uint32_t>(r.uint(4, "status code"));
  p.data = r.str(kMaxValueBytes, "data");
  Status st = r.finish();
  if (!st.ok()) return st;
  *out = std::move(p);
  return Status::Ok();
}

std::string encode_i64(std::int64_t value) {
  std::string out(8, '\0');
  const auto v = static_cast<std::uint64_t>(value);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return out;
}

bool decode_i64(std::string_view data, std::int64_t* out) {
  if (data.size() != 8) return false;
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(static_cast<unsigned char>(data[i])) << (8 * i);
  *out = static_cast<std::int64_t>(v);
  return true;
}

}  // namespace sparcoll::control::wire
