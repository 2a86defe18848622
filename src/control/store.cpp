// The rendezvous store client (the server is store_server.cpp, the encoding store_wire.cpp).
//
// Protocol, version 1. TCP; every message is one frame; integers are little-endian.
//
//   frame   = u32 body_length | body                      (body_length excludes itself)
//   str     = u32 length | bytes
//   hello   = u8 1 | u32 magic "SCST" (0x54534353) | u16 version | str job_token | str identity
//   set     = u8 2 | u64 request_id | str key | str value
//   get     = u8 3 | u64 request_id | str key
//   add     = u8 4 | u64 request_id | str key | i64 delta
//   wait_at_least = u8 5 | u64 request_id | str key | i64 target
//   reply   = u8 6 | u64 request_id | u32 code | str data
//
//   diagnose = u8 7 | u64 request_id | str key            (key ignored, not empty)
//
// A client sends hello first and waits for its reply (request_id 0): code 0 accepts it;
// auth_failure ("job token mismatch") or mismatch (protocol version) rejects it and the server
// closes that connection, and only that one: whoever can reach the port must not be able to end
// the job with one wrong hello (docs/security.md). The server remembers the last few rejected
// hellos; diagnose returns them as text ("" when there were none), so a rank that waits in vain
// for another can say that a process claiming to be it presented a wrong token.
//
// Requests are answered in any order, each reply carrying its request_id. code 0 means success
// and data is the value (get), the new integer as 8 bytes (add) or empty (set, wait_at_least);
// any other code is an ErrorCode and data the message. get and wait_at_least are answered when
// the condition holds, however long that takes: the client applies its own timeout and ignores
// a late reply to a request it gave up on (its request_id no longer matches). Counters are
// stored as decimal text, so get() of a key updated by add() returns e.g. "3".
//
// Bounds: keys 1..4096 bytes, values up to 16 MiB, job token up to 4096 bytes, identity up to
// 256 bytes. A frame that breaks them, or any malformed frame, makes the server log a warning
// and close that client; the server and the other clients carry on.
#include "control/store.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <mutex>
#include <thread>

#include "common/log.hpp"
#include "control/store_address.hpp"
#include "control/store_socket.hpp"
#include "control/store_wire.hpp"

namespace sparcoll::control {
namespace {

class TcpStore final : public Store {
 public:
  TcpStore(std::string server, std::uint32_t io_timeout_ms)
      : server_(std::move(server)), io_timeout_ms_(io_timeout_ms) {}

  // Connects to `address`, retrying refused connections until `deadline`.
  Status open(const sockaddr_in& address, std::uint32_t timeout_ms, Clock::time_point deadline);
  Status say_hello(const std::string& job_token, const std::string& who, std::uint32_t timeout_ms,
                   Clock::time_point deadline);

  Status set(const std::string& key, const std::string& value) override;
  Status get(const std::string& key, std::uint32_t timeout_ms, std::string* value) override;
  Status add(const std::string& key, std::int64_t delta, std::int64_t* result) override;
  Status wait_at_least(const std::string& key, std::int64_t target, std::uint32_t timeout_ms) override;
  std::string diagnose() override;
  std::string local_address() const override { return local_ip_; }

 private:
  // Sends `request` and waits for its reply until `deadline`. On a timeout returns
  // ErrorCode::timeout with an empty message; the caller words it.
  Status call(wire::Request request, Clock::time_point deadline, wire::Reply* reply);
  Status send_frame(const std::string& frame, Clock::time_point deadline);
  Status receive_reply(Clock::time_point deadline, wire::Reply* reply);
  Status check_key(const std::string& key) const;
  Status reply_status(const wire::Reply& reply) const;
  Status request(wire::Request request, std::uint32_t timeout_ms, const std::string& doing, wire::Reply* reply);
  Status closed() const;

  const std::string server_;  // "host:port" as given, for messages
  const std::uint32_t io_timeout_ms_;
  std::mutex mutex_;  // serialises calls: one request on the wire at a time
  UniqueFd fd_;
  std::string local_ip_;
  std::string in_;  // received bytes not yet consumed (a partial frame survives a timeout)
  std::uint64_t next_request_ = 1;
  Status broken_;  // set once the connection cannot be used any more
};

Status TcpStore::open(const sockaddr_in& address, std::uint32_t timeout_ms, Clock::time_point deadline) {
  auto backoff = std::chrono::milliseconds(10);
  int last_error = 0;
  for (;;) {
    UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd.valid()) return Status(ErrorCode::system_error, "socket for rendezvous store " + server_ + ": " + errno_text(errno));
    int err = 0;
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        pollfd p{fd.get(), POLLOUT, 0};
        const int n = ::poll(&p, 1, poll_timeout_ms(deadline));
        if (n > 0) {
          socklen_t len = sizeof err;
          ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
        } else {
          err = n == 0 ? ETIMEDOUT : errno;
        }
      }
    }
    if (err == 0) {
      fd_ = std::move(fd);
      break;
    }
    last_error = err;
    // The server may simply not be up yet (rank 0 starts it while the others already run).
    const bool retryable = err == ECONNREFUSED || err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH ||
                           err == ECONNRESET || err == EINTR || err == EAGAIN;
    if (!retryable) {
      return Status(ErrorCode::system_error, "cannot connect to rendezvous store at " + server_ + ": " + errno_text(err));
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      return Status(ErrorCode::timeout, "rendezvous store at " + server_ + " unreachable for " +
                                            std::to_string(timeout_ms) + " ms: " + errno_text(last_error));
    }
    // The last attempt is made at the deadline itself.
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - now));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
  }
  const int on = 1;
  ::setsockopt(fd_.get(), IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  sockaddr_in local{};
  socklen_t len = sizeof local;
  if (::getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&local), &len) == 0) local_ip_ = format_ip(local);
  return Status::Ok();
}

Status TcpStore::say_hello(const std::string& job_token, const std::string& who, std::uint32_t timeout_ms,
                           Clock::time_point deadline) {
  if (job_token.size() > wire::kMaxTokenBytes) {
    return Status(ErrorCode::invalid_argument, "job token of " + std::to_string(job_token.size()) +
                                                   " bytes exceeds the " + std::to_string(wire::kMaxTokenBytes) +
                                                   "-byte limit");
  }
  if (who.size() > wire::kMaxIdentityBytes) {
    return Status(ErrorCode::invalid_argument, "store client identity '" + who.substr(0, 32) + "...' exceeds " +
                                                   std::to_string(wire::kMaxIdentityBytes) + " bytes");
  }
  wire::Hello hello;
  hello.token = job_token;
  hello.identity = who;
  Status st = send_frame(wire::encode(hello), deadline);
  wire::Reply reply;
  if (st.ok()) st = receive_reply(deadline, &reply);
  if (st.code() == ErrorCode::timeout) {
    return Status(ErrorCode::timeout, "rendezvous store at " + server_ + " did not answer our hello within " +
                                          std::to_string(timeout_ms) + " ms");
  }
  if (!st.ok()) return st;
  if (reply.id != 0) {
    return Status(ErrorCode::protocol_error, "rendezvous store at " + server_ + " answered our hello with request id " +
                                                 std::to_string(reply.id));
  }
  if (reply.code == static_cast<std::uint32_t>(ErrorCode::auth_failure)) {
    return Status(ErrorCode::auth_failure, "store at " + server_ +
                                               " rejected our job token (SPARCOLL_JOB_TOKEN must be the same secret on "
                                               "every process of the job)");
  }
  if (reply.code != 0) {
    return Status(ErrorCode::mismatch, "store at " + server_ + " rejected our hello: " + reply.data);
  }
  return Status::Ok();
}

Status TcpStore::check_key(const std::string& key) const {
  if (key.empty()) return Status(ErrorCode::invalid_argument, "empty store key");
  if (key.size() > wire::kMaxKeyBytes) {
    return Status(ErrorCode::invalid_argument, "store key '" + key.substr(0, 64) + "...' of " +
                                                   std::to_string(key.size()) + " bytes exceeds the " +
                                                   std::to_string(wire::kMaxKeyBytes) + "-byte limit");
  }
  return Status::Ok();
}

Status TcpStore::closed() const {
  return Status(ErrorCode::peer_failure, "rendezvous store at " + server_ + " closed the connection");
}

Status TcpStore::send_frame(const std::string& frame, Clock::time_point deadline) {
  std::size_t sent = 0;
  while (sent < frame.size()) {
    const ssize_t n = ::send(fd_.get(), frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EPIPE || errno == ECONNRESET) return broken_ = closed();
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      return broken_ = Status(ErrorCode::system_error, "send to rendezvous store at " + server_ + ": " + errno_text(errno));
    }
    pollfd p{fd_.get(), POLLOUT, 0};
    const int ready = ::poll(&p, 1, poll_timeout_ms(deadline));
    if (ready < 0 && errno != EINTR) {
      return broken_ = Status(ErrorCode::system_error, "poll on rendezvous store at " + server_ + ": " + errno_text(errno));
    }
    if (ready == 0) {
      // Half a frame is on the wire: the stream cannot be resumed.
      broken_ = Status(ErrorCode::timeout, "rendezvous store at " + server_ + " stopped reading our requests");
      return Status(ErrorCode::timeout, {});
    }
  }
  return Status::Ok();
}

Status TcpStore::receive_reply(Clock::time_point deadline, wire::Reply* reply) {
  for (;;) {
    std::string_view body;
    std::size_t consumed = 0;
    std::size_t announced = 0;
    const auto state = wire::next_frame(in_, wire::kMaxReplyBody, &body, &consumed, &announced);
    if (state == wire::FrameState::too_large) {
      return broken_ = Status(ErrorCode::protocol_error, "rendezvous store at " + server_ + " sent a frame of " +
                                                             std::to_string(announced) + " bytes");
    }
    if (state == wire::FrameState::ok) {
      Status st = wire::decode(body, reply);
      in_.erase(0, consumed);
      if (!st.ok()) {
        return broken_ = Status(ErrorCode::protocol_error,
                                "malformed reply from rendezvous store at " + server_ + ": " + st.message());
      }
      return Status::Ok();
    }
    pollfd p{fd_.get(), POLLIN, 0};
    const int ready = ::poll(&p, 1, poll_timeout_ms(deadline));
    if (ready < 0) {
      if (errno == EINTR) continue;
      return broken_ = Status(ErrorCode::system_error, "poll on rendezvous store at " + server_ + ": " + errno_text(errno));
    }
    if (ready == 0) return Status(ErrorCode::timeout, {});
    char chunk[64 * 1024];
    const ssize_t n = ::recv(fd_.get(), chunk, sizeof chunk, MSG_DONTWAIT);
    if (n > 0) {
      in_.append(chunk, static_cast<std::size_t>(n));
    } else if (n == 0 || errno == ECONNRESET) {
      return broken_ = closed();
    } else if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
      return broken_ = Status(ErrorCode::system_error, "recv from rendezvous store at " + server_ + ": " + errno_text(errno));
    }
  }
}

Status TcpStore::call(wire::Request request, Clock::time_point deadline, wire::Reply* reply) {
  if (!broken_.ok()) return broken_;
  request.id = next_request_++;
  Status st = send_frame(wire::encode(request), deadline);
  if (!st.ok()) return st;
  for (;;) {
    st = receive_reply(deadline, reply);
    if (!st.ok()) return st;
    // A late answer to a request that timed out earlier: nobody waits for it any more.
    if (reply->id == request.id) return Status::Ok();
  }
}

Status TcpStore::reply_status(const wire::Reply& reply) const {
  if (reply.code == 0) return Status::Ok();
  if (reply.code > static_cast<std::uint32_t>(ErrorCode::broken)) {
    return Status(ErrorCode::protocol_error, "rendezvous store at " + server_ + " answered with unknown code " +
                                                 std::to_string(reply.code) + ": " + reply.data);
  }
  return Status(static_cast<ErrorCode>(reply.code), reply.data);
}

// One request about `key`, under mutex_: a bare timeout becomes "timed out after N ms <doing> at
// <server>", and an error the server answered with becomes a Status.
Status TcpStore::request(wire::Request request, std::uint32_t timeout_ms, const std::string& doing,
                         wire::Reply* reply) {
  Status st = call(std::move(request), deadline_after(timeout_ms), reply);
  if (st.code() == ErrorCode::timeout && st.message().empty())
    return Status(ErrorCode::timeout, "timed out after " + std::to_string(timeout_ms) + " ms " + doing + " at " + server_);
  if (!st.ok()) return st;
  return reply_status(*reply);
}

Status TcpStore::set(const std::string& key, const std::string& value) {
  Status st = check_key(key);
  if (!st.ok()) return st;
  if (value.size() > wire::kMaxValueBytes) {
    return Status(ErrorCode::invalid_argument, "value of " + std::to_string(value.size()) + " bytes for store key '" +
                                                   key + "' exceeds the 16 MiB limit");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  wire::Request req;
  req.type = wire::MsgType::set;
  req.key = key;
  req.value = value;
  wire::Reply reply;
  return request(std::move(req), io_timeout_ms_, "setting store key '" + key + "'", &reply);
}

Status TcpStore::get(const std::string& key, std::uint32_t timeout_ms, std::string* value) {
  Status st = check_key(key);
  if (!st.ok()) return st;
  std::lock_guard<std::mutex> lock(mutex_);
  wire::Request req;
  req.type = wire::MsgType::get;
  req.key = key;
  wire::Reply reply;
  st = request(std::move(req), timeout_ms, "waiting for store key '" + key + "'", &reply);
  if (!st.ok()) return st;
  *value = std::move(reply.data);
  return Status::Ok();
}

Status TcpStore::add(const std::string& key, std::int64_t delta, std::int64_t* result) {
  Status st = check_key(key);
  if (!st.ok()) return st;
  std::lock_guard<std::mutex> lock(mutex_);
  wire::Request req;
  req.type = wire::MsgType::add;
  req.key = key;
  req.number = delta;
  wire::Reply reply;
  st = request(std::move(req), io_timeout_ms_, "adding to store key '" + key + "'", &reply);
  if (!st.ok()) return st;
  std::int64_t sum = 0;
  if (!wire::decode_i64(reply.data, &sum)) {
    return broken_ = Status(ErrorCode::protocol_error, "rendezvous store at " + server_ + " answered add of key '" +
                                                           key + "' with " + std::to_string(reply.data.size()) +
                                                           " bytes instead of 8");
  }
  *result = sum;
  return Status::Ok();
}

Status TcpStore::wait_at_least(const std::string& key, std::int64_t target, std::uint32_t timeout_ms) {
  Status st = check_key(key);
  if (!st.ok()) return st;
  std::lock_guard<std::mutex> lock(mutex_);
  wire::Request req;
  req.type = wire::MsgType::wait_at_least;
  req.key = key;
  req.number = target;
  wire::Reply reply;
  return request(std::move(req), timeout_ms,
                 "waiting for store key '" + key + "' to reach " + std::to_string(target), &reply);
}

std::string TcpStore::diagnose() {
  std::lock_guard<std::mutex> lock(mutex_);
  wire::Request req;
  req.type = wire::MsgType::diagnose;
  req.key = "notes";
  wire::Reply reply;
  // Asked only on the way to reporting another failure: a short wait, and no notes on error.
  const Status st = request(std::move(req), 2000, "asking for the store's notes", &reply);
  return st.ok() ? reply.data : std::string();
}

}  // namespace

Status Store::connect(const std::string& host_port, const std::string& job_token, const std::string& who,
                      std::uint32_t timeout_ms, std::unique_ptr<Store>* out) {
  const auto deadline = deadline_after(timeout_ms);
  HostPort address;
  Status st = parse_host_port(host_port, &address);
  if (!st.ok()) return st;
  if (address.port == 0) {
    return Status(ErrorCode::invalid_argument, "store address '" + host_port + "': port 0 cannot be connected to");
  }
  sockaddr_in sa{};
  // A temporary resolver failure (a DNS entry still being published) is retried like a
  // refused connection.
  while ((st = resolve_ipv4(address, /*passive=*/false, &sa)).code() == ErrorCode::no_resource) {
    if (Clock::now() >= deadline) {
      return Status(ErrorCode::timeout, "rendezvous store at " + host_port + " unreachable for " +
                                            std::to_string(timeout_ms) + " ms: " + st.message());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!st.ok()) return st;
  // set() and add() are answered at once by a live server; they get the connect timeout.
  auto store = std::make_unique<TcpStore>(host_port, timeout_ms);
  st = store->open(sa, timeout_ms, deadline);
  if (!st.ok()) return st;
  st = store->say_hello(job_token, who, timeout_ms, deadline);
  if (!st.ok()) return st;
  *out = std::move(store);
  return Status::Ok();
}

}  // namespace sparcoll::control
