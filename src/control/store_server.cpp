// The rendezvous store server: one thread, one epoll set over the listening socket, every
// client and an eventfd that wakes the thread for shutdown. Blocking requests (get,
// wait_at_least) are remembered as waiters and answered when their key changes, so no thread
// ever blocks on a client. Protocol: see the top of store.cpp.
//
// Anyone who can reach the port can connect, so nothing a client does before its hello is
// accepted may cost the job more than that client's connection (docs/security.md): a wrong
// token closes that connection only; a hello must arrive within a timeout; a bounded number of
// connections may wait for theirs (a new one closes the oldest, StoreLimits); at the
// descriptor limit the server stops accepting for a moment instead of spinning on accept; and
// the warnings about all this are rate-limited.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <deque>
#include <iterator>
#include <map>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/log.hpp"
#include "control/store.hpp"
#include "control/store_address.hpp"
#include "control/store_socket.hpp"
#include "control/store_wire.hpp"

namespace sparcoll::control {
namespace {

// Replies a client has not read yet; past this the client is considered stuck and dropped
// rather than letting it grow the server without bound.
constexpr std::size_t kMaxPendingOutput = 256u << 20;
constexpr std::size_t kReadChunk = 64 * 1024;
// StoreLimits (store.hpp): a real client sends its hello right after connecting, so one that
// has not within hello_timeout is holding a connection open (a slowloris) and is closed; a
// flood beyond max_unauthenticated closes the oldest first, so an attacker must win a race
// against a real client's first round trip to keep it out.
// How long accepting pauses when the process is out of descriptors.
constexpr auto kAcceptPause = std::chrono::milliseconds(100);
// Rejected hellos remembered for diagnostics (what a rank that waits in vain is told).
constexpr std::size_t kRejectedNotes = 4;
using Clock = std::chrono::steady_clock;
// epoll user data for the two fds that are not clients (client ids start at 1).
constexpr std::uint64_t kListenTag = 0;
constexpr std::uint64_t kWakeTag = ~std::uint64_t{0};

struct Client {
  UniqueFd fd;
  std::string peer;             // "ip:port"
  std::string identity;         // claimed in the hello, made printable; empty before it
  Clock::time_point hello_deadline;  // before authentication
  bool authenticated = false;
  bool close_after_flush = false;
  bool want_write = false;      // EPOLLOUT registered
  std::string in;
  std::string out;
  std::size_t out_sent = 0;
};

struct Waiter {
  std::uint64_t client = 0;
  std::uint64_t request = 0;
  bool wants_value = true;  // get; otherwise wait_at_least with `target`
  std::int64_t target = 0;
};

// Counters are stored as decimal text so get() of a counter reads naturally ("3").
bool parse_counter(const std::string& text, std::int64_t* out) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, *out);
  return ec == std::errc() && ptr == end && !text.empty();
}

class TcpStoreServer final : public StoreServer {
 public:
  TcpStoreServer(std::string job_token, std::string listen_address, const StoreLimits& limits)
      : token_(std::move(job_token)), listen_address_(std::move(listen_address)), limits_(limits) {}
  ~TcpStoreServer() override;

  Status open(const HostPort& address);
  void launch() { thread_ = std::thread([this] { run(); }); }
  std::uint16_t port() const override { return port_; }

 private:
  void run();
  void accept_clients();
  void on_readable(std::uint64_t id);
  void on_writable(std::uint64_t id);
  // Consumes complete frames from client.in; false once the client has been closed.
  bool process_frames(std::uint64_t id);
  bool handle_hello(std::uint64_t id, std::string_view body);
  void handle_request(std::uint64_t id, const wire::Request& request);
  void notify_waiters(const std::string& key);
  // A hello with a wrong or missing token: that connection is told and closed, nothing else.
  void reject_token(std::uint64_t id);
  // Closes unauthenticated connections past their hello deadline; returns the epoll timeout
  // (ms, -1 for none) until the next deadline or the end of an accept pause.
  int expire_and_next_timeout();
  // Closes the oldest connection that has not said hello; false when there is none.
  bool close_oldest_unauthenticated(const char* why);
  void pause_accepting(int error);
  void resume_accepting();

  void send_reply(std::uint64_t id, std::uint64_t request, ErrorCode code, std::string data);
  void flush(std::uint64_t id);
  void close_client(std::uint64_t id);
  void drop_client(std::uint64_t id, const std::string& reason);  // warns, then closes
  std::string describe(const Client& c) const;

  const std::string token_;
  const std::string listen_address_;  // as given, for logs
  const StoreLimits limits_;
  UniqueFd listen_fd_;
  UniqueFd epoll_fd_;
  UniqueFd wake_fd_;
  std::uint16_t port_ = 0;
  std::thread thread_;

  // Everything below is touched by the server thread only.
  std::uint64_t next_client_ = 1;
  std::unordered_map<std::uint64_t, Client> clients_;
  std::unordered_map<std::string, std::string> data_;
  std::map<std::string, std::vector<Waiter>> waiters_;
  std::deque<std::uint64_t> unauthenticated_;  // ids in accept order (closed ones are skipped)
  std::size_t unauthenticated_count_ = 0;
  Clock::time_point accept_resume_{};  // accepting is paused until then (descriptor limit)
  bool accepting_ = true;
  std::uint64_t rejected_tokens_ = 0;
  std::deque<std::string> rejected_notes_;  // the last few wrong-token hellos, for diagnose
  // One warning line per kind of unwelcome client per interval.
  log::RateLimit token_warnings_{limits_.warn_interval};
  log::RateLimit garbage_warnings_{limits_.warn_interval};
  log::RateLimit flood_warnings_{limits_.warn_interval};
  log::RateLimit accept_warnings_{limits_.warn_interval};
};

TcpStoreServer::~TcpStoreServer() {
  if (thread_.joinable()) {
    const std::uint64_t one = 1;
    // The eventfd counter cannot overflow with one write; nothing useful to do on failure.
    [[maybe_unused]] auto n = ::write(wake_fd_.get(), &one, sizeof one);
    thread_.join();
  }
  // Client sockets close with the map: every connected client sees EOF.
}

Status TcpStoreServer::open(const HostPort& address) {
  sockaddr_in sa{};
  Status st = resolve_ipv4(address, /*passive=*/true, &sa);
  if (!st.ok()) return st;
  listen_fd_.reset(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!listen_fd_.valid()) {
    return Status(ErrorCode::system_error, "store server socket for " + listen_address_ + ": " + errno_text(errno));
  }
  const int on = 1;
  // A restarted job must be able to reuse the port while the old connections sit in TIME_WAIT.
  ::setsockopt(listen_fd_.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  if (::bind(listen_fd_.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    return Status(ErrorCode::system_error, "store server cannot bind " + listen_address_ + ": " + errno_text(errno));
  }
  if (::listen(listen_fd_.get(), SOMAXCONN) != 0) {
    return Status(ErrorCode::system_error, "store server cannot listen on " + listen_address_ + ": " + errno_text(errno));
  }
  socklen_t len = sizeof sa;
  ::getsockname(listen_fd_.get(), reinterpret_cast<sockaddr*>(&sa), &len);
  port_ = ntohs(sa.sin_port);

  epoll_fd_.reset(::epoll_create1(EPOLL_CLOEXEC));
  wake_fd_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!epoll_fd_.valid() || !wake_fd_.valid()) {
    return Status(ErrorCode::system_error, "store server on " + listen_address_ + ": epoll/eventfd: " + errno_text(errno));
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenTag;
  if (::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, listen_fd_.get(), &ev) != 0) {
    return Status(ErrorCode::system_error, "store server on " + listen_address_ + ": epoll_ctl: " + errno_text(errno));
  }
  ev.data.u64 = kWakeTag;
  if (::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, wake_fd_.get(), &ev) != 0) {
    return Status(ErrorCode::system_error, "store server on " + listen_address_ + ": epoll_ctl: " + errno_text(errno));
  }
  return Status::Ok();
}

void TcpStoreServer::run() {
  epoll_event events[64];
  for (;;) {
    const int n = ::epoll_wait(epoll_fd_.get(), events, 64, expire_and_next_timeout());
    if (n < 0) {
      if (errno == EINTR) continue;
      SC_LOG_ERROR("store server on port %u: epoll_wait failed: %s; the store stops serving", port_,
                   errno_text(errno).c_str());
      return;
    }
    for (int i = 0; i < n; ++i) {
      const std::uint64_t tag = events[i].data.u64;
      if (tag == kWakeTag) return;
      if (tag == kListenTag) {
        accept_clients();
        continue;
      }
      // The client may have been closed by an earlier event of this batch.
      if (clients_.count(tag) == 0) continue;
      if (events[i].events & EPOLLOUT) on_writable(tag);
      if (clients_.count(tag) && (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) on_readable(tag);
    }
  }
}

void TcpStoreServer::accept_clients() {
  for (;;) {
    sockaddr_in peer{};
    socklen_t len = sizeof peer;
    UniqueFd fd(::accept4(listen_fd_.get(), reinterpret_cast<sockaddr*>(&peer), &len, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd.valid()) {
      const int error = errno;
      if (error == EINTR || error == ECONNABORTED) continue;
      if (error == EAGAIN || error == EWOULDBLOCK) return;
      // Out of descriptors (EMFILE, ENFILE) or memory: a connection that has not said hello
      // gives its descriptor back; without one, accepting pauses (the pending connection
      // would otherwise wake epoll again at once: the server spun at full speed).
      if ((error == EMFILE || error == ENFILE) && close_oldest_unauthenticated("the process is out of descriptors"))
        continue;
      pause_accepting(error);
      return;
    }
    if (unauthenticated_count_ >= limits_.max_unauthenticated)
      close_oldest_unauthenticated("too many connections have not said hello");
    const int on = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    const std::uint64_t id = next_client_++;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = id;
    if (::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, fd.get(), &ev) != 0) {
      SC_LOG_WARN("store server on port %u: epoll_ctl for %s failed: %s", port_, format_ip_port(peer).c_str(),
                  errno_text(errno).c_str());
      continue;
    }
    Client& c = clients_[id];
    c.fd = std::move(fd);
    c.peer = format_ip_port(peer);
    c.hello_deadline = Clock::now() + limits_.hello_timeout;
    unauthenticated_.push_back(id);
    ++unauthenticated_count_;
    SC_LOG_DEBUG("store: connection from %s", c.peer.c_str());
  }
}

bool TcpStoreServer::close_oldest_unauthenticated(const char* why) {
  while (!unauthenticated_.empty()) {
    const std::uint64_t id = unauthenticated_.front();
    unauthenticated_.pop_front();
    auto it = clients_.find(id);
    if (it == clients_.end() || it->second.authenticated) continue;
    std::uint64_t held_back = 0;
    if (flood_warnings_.allow(&held_back))
      SC_LOG_WARN("store server on port %u: %s: closing the oldest such connection, from %s%s", port_, why,
                  it->second.peer.c_str(), log::RateLimit::held_back_note(held_back).c_str());
    close_client(id);
    return true;
  }
  return false;
}

void TcpStoreServer::pause_accepting(int error) {
  std::uint64_t held_back = 0;
  if (accept_warnings_.allow(&held_back))
    SC_LOG_WARN("store server on port %u: accept failed: %s; not accepting for %lld ms%s", port_,
                errno_text(error).c_str(), static_cast<long long>(kAcceptPause.count()),
                log::RateLimit::held_back_note(held_back).c_str());
  epoll_event ev{};
  ev.events = 0;
  ev.data.u64 = kListenTag;
  ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_MOD, listen_fd_.get(), &ev);
  accepting_ = false;
  accept_resume_ = Clock::now() + kAcceptPause;
}

void TcpStoreServer::resume_accepting() {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenTag;
  ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_MOD, listen_fd_.get(), &ev);
  accepting_ = true;
}

int TcpStoreServer::expire_and_next_timeout() {
  const auto now = Clock::now();
  if (!accepting_ && now >= accept_resume_) resume_accepting();
  // Deadlines grow in accept order, so only the front can be due.
  while (!unauthenticated_.empty()) {
    auto it = clients_.find(unauthenticated_.front());
    if (it == clients_.end() || it->second.authenticated) {
      unauthenticated_.pop_front();
      continue;
    }
    if (it->second.hello_deadline > now) break;
    const std::uint64_t id = unauthenticated_.front();
    unauthenticated_.pop_front();
    std::uint64_t held_back = 0;
    if (flood_warnings_.allow(&held_back))
      SC_LOG_WARN("store server on port %u: closing the connection from %s: no hello within %lld ms%s", port_,
                  it->second.peer.c_str(), static_cast<long long>(limits_.hello_timeout.count()),
                  log::RateLimit::held_back_note(held_back).c_str());
    close_client(id);
  }
  Clock::time_point next = Clock::time_point::max();
  if (!unauthenticated_.empty()) next = clients_.at(unauthenticated_.front()).hello_deadline;
  if (!accepting_) next = std::min(next, accept_resume_);
  if (next == Clock::time_point::max()) return -1;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(next - now).count();
  return static_cast<int>(std::clamp<long long>(ms, 0, 60'000));
}

void TcpStoreServer::on_readable(std::uint64_t id) {
  Client& c = clients_.at(id);
  for (;;) {
    const std::size_t old = c.in.size();
    // Before its hello a client gets no more buffer than a hello can fill: a thousand
    // connections with half a hello each must not cost the job 64 KiB apiece.
    const std::size_t hello_frame = 4 + wire::kMaxHelloBody;
    const std::size_t chunk = c.authenticated ? kReadChunk : (old < hello_frame ? hello_frame - old : 1);
    c.in.resize(old + chunk);
    const ssize_t n = ::recv(c.fd.get(), c.in.data() + old, chunk, 0);
    c.in.resize(old + (n > 0 ? static_cast<std::size_t>(n) : 0));
    if (n > 0) {
      if (!process_frames(id)) return;
      continue;
    }
    if (n == 0) {
      SC_LOG_DEBUG("store: %s disconnected", describe(c).c_str());
      close_client(id);
      return;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    SC_LOG_DEBUG("store: %s: recv failed: %s", describe(c).c_str(), errno_text(errno).c_str());
    close_client(id);
    return;
  }
}

bool TcpStoreServer::process_frames(std::uint64_t id) {
  std::size_t offset = 0;
  for (;;) {
    Client& c = clients_.at(id);
    // Once the client is to be closed (rejected hello) nothing more it sends is read.
    if (c.close_after_flush) {
      c.in.clear();
      return true;
    }
    const std::size_t max_body = c.authenticated ? wire::kMaxRequestBody : wire::kMaxHelloBody;
    std::string_view body;
    std::size_t consumed = 0;
    std::size_t announced = 0;
    const auto state = wire::next_frame(std::string_view(c.in).substr(offset), max_body, &body, &consumed, &announced);
    if (state == wire::FrameState::incomplete) break;
    if (state == wire::FrameState::too_large) {
      drop_client(id, "frame of " + std::to_string(announced) + " bytes exceeds the " + std::to_string(max_body) +
                          "-byte limit");
      return false;
    }
    if (!c.authenticated) {
      if (!handle_hello(id, body)) return false;
    } else {
      wire::Request request;
      Status st = wire::decode(body, &request);
      if (!st.ok()) {
        drop_client(id, "malformed request: " + st.message());
        return false;
      }
      handle_request(id, request);
      if (clients_.count(id) == 0) return false;
    }
    offset += consumed;
  }
  clients_.at(id).in.erase(0, offset);
  return true;
}

bool TcpStoreServer::handle_hello(std::uint64_t id, std::string_view body) {
  Client& c = clients_.at(id);
  wire::Hello hello;
  Status st = wire::decode(body, &hello);
  if (!st.ok()) {
    drop_client(id, "malformed hello: " + st.message());
    return false;
  }
  if (hello.magic != wire::kMagic) {
    drop_client(id, "not a sparcoll store client (bad magic)");
    return false;
  }
  c.identity = hello.identity.empty() ? "unnamed client" : log::printable(hello.identity);
  if (hello.version != wire::kVersion) {
    std::uint64_t held_back = 0;
    if (garbage_warnings_.allow(&held_back))
      SC_LOG_WARN("store: rejected %s: it speaks store protocol version %u, this server speaks %u%s", describe(c).c_str(),
                  hello.version, wire::kVersion, log::RateLimit::held_back_note(held_back).c_str());
    send_reply(id, 0, ErrorCode::mismatch,
               "client speaks store protocol version " + std::to_string(hello.version) + ", server speaks " +
                   std::to_string(wire::kVersion));
    c.close_after_flush = true;
    flush(id);
    return false;
  }
  // Compare every byte so the time taken does not reveal how much of the token was right.
  unsigned char diff = hello.token.size() == token_.size() ? 0 : 1;
  for (std::size_t i = 0; i < hello.token.size() && i < token_.size(); ++i) {
    diff |= static_cast<unsigned char>(hello.token[i] ^ token_[i]);
  }
  if (diff != 0) {
    reject_token(id);
    return false;
  }
  c.authenticated = true;
  --unauthenticated_count_;
  send_reply(id, 0, ErrorCode::ok, {});
  SC_LOG_DEBUG("store: %s joined", describe(c).c_str());
  return clients_.count(id) != 0;
}

void TcpStoreServer::handle_request(std::uint64_t id, const wire::Request& q) {
  switch (q.type) {
    case wire::MsgType::diagnose: {
      std::string notes;
      if (rejected_tokens_ > 0) {
        notes = "the store rejected " + std::to_string(rejected_tokens_) + " connection(s) with a wrong job token";
        for (const auto& note : rejected_notes_) notes += "; " + note;
      }
      send_reply(id, q.id, ErrorCode::ok, std::move(notes));
      return;
    }
    case wire::MsgType::set:
      data_[q.key] = q.value;
      send_reply(id, q.id, ErrorCode::ok, {});
      notify_waiters(q.key);
      return;
    case wire::MsgType::get: {
      auto it = data_.find(q.key);
      if (it != data_.end()) {
        send_reply(id, q.id, ErrorCode::ok, it->second);
      } else {
        waiters_[q.key].push_back(Waiter{id, q.id, true, 0});
      }
      return;
    }
    case wire::MsgType::add: {
      std::int64_t current = 0;
      auto it = data_.find(q.key);
      if (it != data_.end() && !parse_counter(it->second, &current)) {
        send_reply(id, q.id, ErrorCode::invalid_argument, "store key '" + q.key + "' does not hold an integer");
        return;
      }
      std::int64_t sum = 0;
      if (__builtin_add_overflow(current, q.number, &sum)) {
        send_reply(id, q.id, ErrorCode::invalid_argument,
                   "adding " + std::to_string(q.number) + " to store key '" + q.key + "' (" + std::to_string(current) +
                       ") overflows 64 bits");
        return;
      }
      data_[q.key] = std::to_string(sum);
      send_reply(id, q.id, ErrorCode::ok, wire::encode_i64(sum));
      notify_waiters(q.key);
      return;
    }
    case wire::MsgType::wait_at_least: {
      auto it = data_.find(q.key);
      std::int64_t current = 0;
      if (it != data_.end() && !parse_counter(it->second, &current)) {
        send_reply(id, q.id, ErrorCode::invalid_argument, "store key '" + q.key + "' does not hold an integer");
        return;
      }
      if (it != data_.end() && current >= q.number) {
        send_reply(id, q.id, ErrorCode::ok, {});
      } else {
        waiters_[q.key].push_back(Waiter{id, q.id, false, q.number});
      }
      return;
    }
    default:
      // decode() admits request types only.
      drop_client(id, "unexpected message type");
      return;
  }
}

void TcpStoreServer::notify_waiters(const std::string& key) {
  auto it = waiters_.find(key);
  if (it == waiters_.end()) return;
  const std::string& value = data_.at(key);
  std::int64_t counter = 0;
  const bool is_counter = parse_counter(value, &counter);
  std::vector<Waiter> still_waiting;
  // Take the list first: send_reply may close a client, which edits waiters_.
  std::vector<Waiter> waiting = std::move(it->second);
  waiters_.erase(it);
  for (const Waiter& w : waiting) {
    if (clients_.count(w.client) == 0) continue;
    if (w.wants_value) {
      send_reply(w.client, w.request, ErrorCode::ok, value);
    } else if (!is_counter) {
      send_reply(w.client, w.request, ErrorCode::invalid_argument, "store key '" + key + "' does not hold an integer");
    } else if (counter >= w.target) {
      send_reply(w.client, w.request, ErrorCode::ok, {});
    } else {
      still_waiting.push_back(w);
    }
  }
  if (!still_waiting.empty()) {
    auto& list = waiters_[key];
    list.insert(list.end(), still_waiting.begin(), still_waiting.end());
  }
}

void TcpStoreServer::reject_token(std::uint64_t id) {
  Client& c = clients_.at(id);
  ++rejected_tokens_;
  // The claimed identity is the client's word, not a fact: it is reported as a claim.
  rejected_notes_.push_back("a connection from " + c.peer + " claiming to be '" + c.identity +
                            "' presented a wrong job token");
  if (rejected_notes_.size() > kRejectedNotes) rejected_notes_.pop_front();
  std::uint64_t held_back = 0;
  if (token_warnings_.allow(&held_back))
    SC_LOG_WARN("store server on port %u: closing the connection from %s claiming to be '%s': wrong job token%s",
                port_, c.peer.c_str(), c.identity.c_str(), log::RateLimit::held_back_note(held_back).c_str());
  send_reply(id, 0, ErrorCode::auth_failure, "job token mismatch");
  if (clients_.count(id) == 0) return;
  clients_.at(id).close_after_flush = true;
  flush(id);
}

void TcpStoreServer::send_reply(std::uint64_t id, std::uint64_t request, ErrorCode code, std::string data) {
  Client& c = clients_.at(id);
  wire::Reply reply;
  reply.id = request;
  reply.code = static_cast<std::uint32_t>(code);
  reply.data = std::move(data);
  c.out += wire::encode(reply);
  if (c.out.size() - c.out_sent > kMaxPendingOutput) {
    drop_client(id, "it does not read its replies (" + std::to_string(c.out.size() - c.out_sent) + " bytes pending)");
    return;
  }
  flush(id);
}

void TcpStoreServer::flush(std::uint64_t id) {
  Client& c = clients_.at(id);
  while (c.out_sent < c.out.size()) {
    const ssize_t n = ::send(c.fd.get(), c.out.data() + c.out_sent, c.out.size() - c.out_sent, MSG_NOSIGNAL);
    if (n > 0) {
      c.out_sent += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    SC_LOG_DEBUG("store: %s: send failed: %s", describe(c).c_str(), errno_text(errno).c_str());
    close_client(id);
    return;
  }
  const bool drained = c.out_sent == c.out.size();
  if (drained) {
    c.out.clear();
    c.out_sent = 0;
    if (c.close_after_flush) {
      close_client(id);
      return;
    }
  }
  if (drained == c.want_write) {
    c.want_write = !drained;
    epoll_event ev{};
    ev.events = EPOLLIN | (c.want_write ? EPOLLOUT : 0u);
    ev.data.u64 = id;
    ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_MOD, c.fd.get(), &ev);
  }
}

void TcpStoreServer::on_writable(std::uint64_t id) { flush(id); }

void TcpStoreServer::close_client(std::uint64_t id) {
  auto it = clients_.find(id);
  if (it == clients_.end()) return;
  // Its entry in unauthenticated_ is skipped when reached; the count is exact at once.
  if (!it->second.authenticated) --unauthenticated_count_;
  ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, it->second.fd.get(), nullptr);
  clients_.erase(it);
  for (auto w = waiters_.begin(); w != waiters_.end();) {
    std::erase_if(w->second, [id](const Waiter& x) { return x.client == id; });
    w = w->second.empty() ? waiters_.erase(w) : std::next(w);
  }
}

void TcpStoreServer::drop_client(std::uint64_t id, const std::string& reason) {
  const Client& c = clients_.at(id);
  // Garbage before a hello comes from anyone who can reach the port: rate-limited.
  std::uint64_t held_back = 0;
  if (c.authenticated)
    SC_LOG_WARN("store: closing %s: %s", describe(c).c_str(), reason.c_str());
  else if (garbage_warnings_.allow(&held_back))
    SC_LOG_WARN("store server on port %u: closing the connection from %s: %s%s", port_, describe(c).c_str(),
                reason.c_str(), log::RateLimit::held_back_note(held_back).c_str());
  close_client(id);
}

std::string TcpStoreServer::describe(const Client& c) const {
  return c.identity.empty() ? c.peer : c.identity + " from " + c.peer;
}

}  // namespace

Status StoreServer::start(const std::string& host_port, const std::string& job_token,
                          std::unique_ptr<StoreServer>* out, const StoreLimits& limits) {
  HostPort address;
  Status st = parse_host_port(host_port, &address);
  if (!st.ok()) return st;
  auto server = std::make_unique<TcpStoreServer>(job_token, host_port, limits);
  st = server->open(address);
  if (!st.ok()) return st;
  server->launch();
  SC_LOG_DEBUG("store: serving on %s (port %u)", host_port.c_str(), server->port());
  *out = std::move(server);
  return Status::Ok();
}

}  // namespace sparcoll::control
