#include "tcp_setup.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <memory>

#include "common/log.hpp"
#include "tcp_address.hpp"
#include "tcp_congestion.hpp"
#include "tcp_wire.hpp"
#include "transport/setup_util.hpp"

namespace sparcoll::transport::tcp {

ConnectionTable::~ConnectionTable() {
  for (int fd : fds_)
    if (fd >= 0) close(fd);
}

void ConnectionTable::put(std::size_t peer_pos, std::uint32_t channel, int fd, std::string remote) {
  fds_[slot(peer_pos, channel)] = fd;
  remotes_[slot(peer_pos, channel)] = std::move(remote);
}

int ConnectionTable::take(std::size_t peer_pos, std::uint32_t channel) {
  const int fd = fds_[slot(peer_pos, channel)];
  fds_[slot(peer_pos, channel)] = -1;
  return fd;
}

namespace {

constexpr std::uint64_t kListenerTag = ~std::uint64_t{0};

// The listener is open to anyone who can reach it for as long as setup runs, so a stranger's
// connection may cost only itself (docs/security.md): it must complete its hello within
// kHelloTimeout; at most kMaxIncoming accepted connections may be in their handshake (a new
// one closes the oldest); at the descriptor limit accepting pauses instead of failing setup;
// a wrong token closes that connection, noted for the timeout message; warnings rate-limited.
constexpr auto kHelloTimeout = std::chrono::seconds(5);
constexpr std::size_t kMaxIncoming = 64;
constexpr auto kAcceptPause = std::chrono::milliseconds(100);
constexpr std::size_t kMaxNotes = 4;

// One connection still in its handshake.
struct Pending {
  enum class Step : std::uint8_t { writing, reading_answer, reading_hello, reading_token };

  int fd = -1;
  std::uint64_t tag = 0;     // position in Handshaker::pending_, the epoll data
  bool outgoing = false;
  std::size_t peer_pos = 0;  // outgoing: from the start; incoming: once the hello names it
  std::uint32_t channel = 0;
  Step step = Step::writing;
  std::string out;           // bytes to send, out_sent of them already gone
  std::size_t out_sent = 0;
  std::string in;            // bytes received so far, in_need in total expected
  std::size_t in_need = 0;
  HandshakeHeader hello;     // incoming: the decoded hello
  std::string remote;        // "ip:port" of the far end
  std::chrono::steady_clock::time_point hello_deadline;  // incoming, until its hello is read
};

bool constant_time_equal(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

Status set_nodelay(int fd, const std::string& remote) {
  const int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
    return Status(ErrorCode::system_error, "setting TCP_NODELAY on the connection to " + remote + " failed: " + errno_text(errno));
  return Status::Ok();
}

class Handshaker {
 public:
  explicit Handshaker(const DriverContext& ctx) : ctx_(ctx), deadline_(ctx.deadline_ms), table_(ctx.peers.size(), ctx.channels) {}
  ~Handshaker();

  Status run(ConnectionTable* out);

 private:
  Status listen_and_publish();
  Status choose_listen_address(SocketAddress* bind_to, std::string* advertise_ip);
  Status connect_to_higher_peers();
  Status accept_all();
  Status advance(Pending& p);
  Status read_some(Pending& p, bool* complete);
  Status on_hello(Pending& p);
  Status on_answer(Pending& p);
  Status finish(Pending& p);
  // reject_code ok: just close; otherwise answer reject first. Logs unless the caller reports.
  void drop(Pending& p, const std::string& reason, ErrorCode reject_code, bool log = true);
  Status watch(Pending& p, std::uint32_t events);
  Status connection_lost(Pending& p, const std::string& what);
  std::string label(const Pending& p) const {
    return process_name(ctx_, ctx_.peers[p.peer_pos]) + " (" + p.remote + ")";
  }
  // The process runs on this host: the same host identity (hostname and boot id) as ours.
  bool on_this_host(std::uint32_t process) const {
    const auto& all = ctx_.processes;
    return process < all.size() && ctx_.self < all.size() && !all[process].host.empty() &&
           all[process].host == all[ctx_.self].host;
  }
  Status timeout_error() const;
  // Incoming connections past their hello deadline are closed; returns the next deadline's
  // distance in ms (capped by `cap`), also ending an accept pause.
  int expire_incoming(int cap);
  bool close_oldest_incoming(const char* why);
  void warn_limited(const std::string& what);
  std::size_t take_slot();

  const DriverContext& ctx_;
  const SetupDeadline deadline_;
  ConnectionTable table_;
  std::size_t missing_ = 0;
  int epoll_ = -1;
  int listener_ = -1;
  std::vector<std::int32_t> peer_pos_of_;  // process index -> position in ctx.peers, -1 if not a peer
  std::vector<std::unique_ptr<Pending>> pending_;  // index = epoll tag; closed ones have fd -1
  std::vector<std::size_t> free_slots_;             // closed entries of pending_, for reuse
  std::deque<std::size_t> incoming_;                // accepted, hello not read yet, oldest first
  std::size_t incoming_count_ = 0;
  std::chrono::steady_clock::time_point accept_resume_{};
  bool accepting_ = true;
  std::deque<std::string> notes_;  // wrong-token hellos, for the timeout message
  log::RateLimit warnings_{std::chrono::seconds(10)};
};

Handshaker::~Handshaker() {
  for (auto& p : pending_)
    if (p->fd >= 0) close(p->fd);
  if (listener_ >= 0) close(listener_);
  if (epoll_ >= 0) close(epoll_);
}

Status Handshaker::run(ConnectionTable* out) {
  missing_ = ctx_.peers.size() * ctx_.channels;
  peer_pos_of_.assign(ctx_.processes.size(), -1);
  for (std::size_t i = 0; i < ctx_.peers.size(); ++i) peer_pos_of_[ctx_.peers[i]] = static_cast<std::int32_t>(i);
  epoll_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_ < 0) return Status(ErrorCode::system_error, "epoll_create1 for tcp setup failed: " + errno_text(errno));
  Status status = listen_and_publish();
  if (!status.ok()) return status;
  status = connect_to_higher_peers();
  if (!status.ok()) return status;
  while (missing_ > 0) {
    const std::uint32_t left = deadline_.remaining_ms();
    if (left == 0) return timeout_error();
    epoll_event events[16];
    const int n = epoll_wait(epoll_, events, 16, expire_incoming(static_cast<int>(left < 100 ? left : 100)));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status(ErrorCode::system_error, "epoll_wait during tcp setup failed: " + errno_text(errno));
    }
    for (int i = 0; i < n && missing_ > 0; ++i) {
      if (events[i].data.u64 == kListenerTag) {
        status = accept_all();
      } else {
        Pending& p = *pending_[events[i].data.u64];
        status = p.fd >= 0 ? advance(p) : Status::Ok();
      }
      if (!status.ok()) return status;
    }
  }
  *out = std::move(table_);
  return Status::Ok();
}

Status Handshaker::choose_listen_address(SocketAddress* bind_to, std::string* advertise_ip) {
  // Where peers reach us: our ProcessInfo address, else the address we reach the job from.
  std::string reachable = ctx_.processes[ctx_.self].address;
  if (reachable.empty()) reachable = ctx_.exchange->local_address();
  const std::string& configured = ctx_.options->tcp_addr;
  SocketAddress reachable_address;
  if (!reachable.empty()) {
    Status status = parse_address(reachable, process_name(ctx_, ctx_.self) + "'s address", &reachable_address);
    if (!status.ok()) return status;
    reachable_address.set_port(0);  // an address given for the process, not for our listener
  }
  if (!configured.empty()) {
    Status status = parse_address(configured, "SPARCOLL_TCP_ADDR", bind_to);
    if (!status.ok()) return status;
  } else if (!reachable.empty()) {
    *bind_to = reachable_address;
  } else {
    return Status(ErrorCode::invalid_argument, "tcp driver does not know which address to listen on: set SPARCOLL_TCP_ADDR");
  }
  if (bind_to->is_wildcard()) {
    if (reachable.empty())
      return Status(ErrorCode::invalid_argument, "tcp driver listens on a wildcard address but has no address to publish; "
                                                 "set SPARCOLL_TCP_ADDR to this host's IP address");
    *advertise_ip = format_address(reachable_address);
    advertise_ip->erase(advertise_ip->rfind(':'));  // drop the port, kept as an IP
  }
  return Status::Ok();
}

Status Handshaker::listen_and_publish() {
  SocketAddress address;
  std::string advertise_ip;
  Status status = choose_listen_address(&address, &advertise_ip);
  if (!status.ok()) return status;
  listener_ = socket(address.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listener_ < 0) return Status(ErrorCode::system_error, "tcp listener socket failed: " + errno_text(errno));
  const int one = 1;
  setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  // Only lower-numbered peers connect here; accepted connections inherit the listener's choice.
  bool callers_local = true;
  for (std::uint32_t peer : ctx_.peers)
    if (peer < ctx_.self) callers_local = callers_local && on_this_host(peer);
  status = choose_congestion_control(listener_, ctx_.options->tcp_congestion, callers_local, "the listener");
  if (!status.ok()) return status;
  if (bind(listener_, address.get(), address.length) != 0)
    return Status(ErrorCode::system_error, "tcp driver cannot listen on " + format_address(address) + ": " + errno_text(errno));
  if (listen(listener_, SOMAXCONN) != 0)
    return Status(ErrorCode::system_error, "listen on " + format_address(address) + " failed: " + errno_text(errno));
  SocketAddress bound;
  bound.length = sizeof bound.storage;
  if (getsockname(listener_, bound.get(), &bound.length) != 0)
    return Status(ErrorCode::system_error, "getsockname of the tcp listener failed: " + errno_text(errno));
  std::string published = format_address(bound);
  if (!advertise_ip.empty()) published = advertise_ip + ":" + std::to_string(bound.port());
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.u64 = kListenerTag;
  if (epoll_ctl(epoll_, EPOLL_CTL_ADD, listener_, &event) != 0)
    return Status(ErrorCode::system_error, "epoll_ctl for the tcp listener failed: " + errno_text(errno));
  SC_LOG_DEBUG("tcp driver listening on %s", published.c_str());
  return ctx_.exchange->publish("address", published);
}

Status Handshaker::connect_to_higher_peers() {
  std::vector<std::uint32_t> higher;
  for (std::uint32_t peer : ctx_.peers)
    if (peer > ctx_.self) higher.push_back(peer);
  std::vector<std::string> addresses;
  Status status = read_from_peers(ctx_, higher, "address", false, deadline_, "tcp", "publish their tcp addresses", &addresses);
  if (!status.ok()) return status;
  for (std::size_t i = 0; i < higher.size(); ++i) {
    SocketAddress address;
    status = parse_address(addresses[i], process_name(ctx_, higher[i]) + "'s published tcp address", &address);
    if (!status.ok()) return status;
    for (std::uint32_t channel = 0; channel < ctx_.channels; ++channel) {
      auto p = std::make_unique<Pending>();
      p->outgoing = true;
      p->peer_pos = static_cast<std::size_t>(peer_pos_of_[higher[i]]);
      p->channel = channel;
      p->remote = addresses[i];
      p->fd = socket(address.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (p->fd < 0) return Status(ErrorCode::system_error, "tcp socket for " + label(*p) + " failed: " + errno_text(errno));
      const std::size_t tag = take_slot();
      p->tag = tag;
      pending_[tag] = std::move(p);
      Pending& conn = *pending_[tag];
      status = set_nodelay(conn.fd, conn.remote);
      if (!status.ok()) return status;
      status = choose_congestion_control(conn.fd, ctx_.options->tcp_congestion, on_this_host(higher[i]),
                                         "the connection to " + label(conn));
      if (!status.ok()) return status;
      if (connect(conn.fd, address.get(), address.length) != 0 && errno != EINPROGRESS)
        return Status(ErrorCode::peer_failure, "cannot connect to " + label(conn) + " for tcp channel " +
                                                   std::to_string(channel) + ": " + errno_text(errno));
      HandshakeHeader hello;
      hello.kind = HandshakeKind::hello;
      hello.process = ctx_.self;
      hello.channel = channel;
      conn.out = encode_handshake(hello, ctx_.options->job_token);
      conn.step = Pending::Step::writing;
      epoll_event event{};
      event.events = EPOLLOUT;
      event.data.u64 = conn.tag;
      if (epoll_ctl(epoll_, EPOLL_CTL_ADD, conn.fd, &event) != 0)
        return Status(ErrorCode::system_error, "epoll_ctl during tcp setup failed: " + errno_text(errno));
      // A send on a socket still connecting returns EAGAIN (then EPOLLOUT tells us when to
      // retry) or the connect error, so the hello goes out as soon as the connection is up.
    }
  }
  return Status::Ok();
}

Status Handshaker::accept_all() {
  for (;;) {
    SocketAddress from;
    from.length = sizeof from.storage;
    const int fd = accept4(listener_, from.get(), &from.length, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      const int error = errno;
      if (error == EAGAIN || error == EWOULDBLOCK) return Status::Ok();
      if (error == EINTR || error == ECONNABORTED) continue;
      // Out of descriptors: a stranger's half-open handshake gives its descriptor back, or
      // accepting pauses; a flood must not fail the job's setup.
      if ((error == EMFILE || error == ENFILE) && close_oldest_incoming("out of descriptors")) continue;
      if (error == EMFILE || error == ENFILE || error == ENOBUFS || error == ENOMEM) {
        warn_limited("accept on the tcp listener failed: " + errno_text(error) + "; pausing accepts");
        epoll_event paused{};
        paused.data.u64 = kListenerTag;
        epoll_ctl(epoll_, EPOLL_CTL_MOD, listener_, &paused);
        accepting_ = false;
        accept_resume_ = std::chrono::steady_clock::now() + kAcceptPause;
        return Status::Ok();
      }
      return Status(ErrorCode::system_error, "accept on the tcp listener failed: " + errno_text(error));
    }
    if (incoming_count_ >= kMaxIncoming) close_oldest_incoming("too many connections in their handshake");
    auto p = std::make_unique<Pending>();
    p->fd = fd;
    p->remote = format_address(from);
    // Accepted connections need it too (the listener has none to inherit): with Nagle on one
    // side, a small write waited for the peer's delayed ack, ~40 ms per block-sparse op.
    const Status nodelay = set_nodelay(fd, p->remote);
    if (!nodelay.ok()) {
      close(fd);
      return nodelay;
    }
    p->step = Pending::Step::reading_hello;
    p->in_need = kHandshakeHeaderBytes;
    p->hello_deadline = std::chrono::steady_clock::now() + kHelloTimeout;
    p->tag = take_slot();
    const std::uint64_t tag = p->tag;
    pending_[tag] = std::move(p);
    incoming_.push_back(tag);
    ++incoming_count_;
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u64 = tag;
    if (epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &event) != 0)
      return Status(ErrorCode::system_error, "epoll_ctl during tcp setup failed: " + errno_text(errno));
  }
}

std::size_t Handshaker::take_slot() {
  if (!free_slots_.empty()) {
    const std::size_t slot = free_slots_.back();
    free_slots_.pop_back();
    return slot;
  }
  pending_.push_back(nullptr);
  return pending_.size() - 1;
}

void Handshaker::warn_limited(const std::string& what) {
  std::uint64_t held_back = 0;
  if (warnings_.allow(&held_back))
    SC_LOG_WARN("tcp setup: %s%s", what.c_str(), log::RateLimit::held_back_note(held_back).c_str());
}

bool Handshaker::close_oldest_incoming(const char* why) {
  while (!incoming_.empty()) {
    Pending& p = *pending_[incoming_.front()];
    incoming_.pop_front();
    if (p.fd < 0 || p.outgoing ||
        (p.step != Pending::Step::reading_hello && p.step != Pending::Step::reading_token))
      continue;
    drop(p, std::string(why) + ": closing the oldest connection still in its handshake", ErrorCode::ok);
    return true;
  }
  return false;
}

int Handshaker::expire_incoming(int cap) {
  const auto now = std::chrono::steady_clock::now();
  if (!accepting_ && now >= accept_resume_) {
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u64 = kListenerTag;
    epoll_ctl(epoll_, EPOLL_CTL_MOD, listener_, &event);
    accepting_ = true;
  }
  // Deadlines grow in accept order: only the front can be due.
  while (!incoming_.empty()) {
    Pending& p = *pending_[incoming_.front()];
    const bool waiting = p.fd >= 0 && !p.outgoing &&
                         (p.step == Pending::Step::reading_hello || p.step == Pending::Step::reading_token);
    if (!waiting) {
      incoming_.pop_front();
      continue;
    }
    if (p.hello_deadline > now) break;
    incoming_.pop_front();
    drop(p, "no hello within " + std::to_string(std::chrono::duration_cast<std::chrono::seconds>(kHelloTimeout).count()) +
                " s", ErrorCode::ok);
  }
  auto next = now + std::chrono::milliseconds(cap);
  if (!incoming_.empty()) next = std::min(next, pending_[incoming_.front()]->hello_deadline);
  if (!accepting_) next = std::min(next, accept_resume_);
  return static_cast<int>(std::max<long long>(0, std::chrono::ceil<std::chrono::milliseconds>(next - now).count()));
}

Status Handshaker::watch(Pending& p, std::uint32_t events) {
  epoll_event event{};
  event.events = events;
  event.data.u64 = p.tag;
  if (epoll_ctl(epoll_, EPOLL_CTL_MOD, p.fd, &event) != 0)
    return Status(ErrorCode::system_error, "epoll_ctl during tcp setup failed: " + errno_text(errno));
  return Status::Ok();
}

Status Handshaker::advance(Pending& p) {
  for (;;) {
    switch (p.step) {
      case Pending::Step::writing: {
        while (p.out_sent < p.out.size()) {
          const ssize_t n = send(p.fd, p.out.data() + p.out_sent, p.out.size() - p.out_sent, MSG_NOSIGNAL | MSG_DONTWAIT);
          if (n > 0) {
            p.out_sent += static_cast<std::size_t>(n);
          } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            return Status::Ok();  // still connecting, or the buffer is full: EPOLLOUT is watched
          } else if (errno != EINTR) {
            return connection_lost(p, errno_text(errno));
          }
        }
        if (!p.outgoing) return finish(p);  // our accept went out
        p.step = Pending::Step::reading_answer;
        p.in_need = kHandshakeHeaderBytes;
        Status status = watch(p, EPOLLIN);
        if (!status.ok()) return status;
        continue;
      }
      case Pending::Step::reading_answer:
      case Pending::Step::reading_hello:
      case Pending::Step::reading_token: {
        bool complete = false;
        Status status = read_some(p, &complete);
        if (!status.ok() || !complete || p.fd < 0) return status;
        if (p.step == Pending::Step::reading_answer) return on_answer(p);
        status = on_hello(p);
        if (!status.ok() || p.fd < 0) return status;
        continue;  // read the token, or write the answer now queued
      }
    }
  }
}

// Reads up to in_need bytes, never more: whatever follows the handshake belongs to the channel.
Status Handshaker::read_some(Pending& p, bool* complete) {
  const std::size_t have = p.in.size();
  p.in.resize(p.in_need);
  const ssize_t n = recv(p.fd, p.in.data() + have, p.in_need - have, MSG_DONTWAIT);
  if (n > 0) {
    p.in.resize(have + static_cast<std::size_t>(n));
    *complete = p.in.size() == p.in_need;
    return Status::Ok();
  }
  p.in.resize(have);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return Status::Ok();
  return connection_lost(p, n == 0 ? "closed the connection" : errno_text(errno));
}

Status Handshaker::connection_lost(Pending& p, const std::string& what) {
  if (!p.outgoing) {
    drop(p, what + " during the handshake", ErrorCode::ok);
    return Status::Ok();
  }
  return Status(ErrorCode::peer_failure, label(p) + ": " + what + " during the tcp handshake on channel " +
                                             std::to_string(p.channel));
}

Status Handshaker::on_hello(Pending& p) {
  const auto* bytes = reinterpret_cast<const std::byte*>(p.in.data());
  if (p.step == Pending::Step::reading_hello) {
    const char* problem = decode_handshake(bytes, &p.hello);
    if (problem == nullptr && p.hello.kind != HandshakeKind::hello) problem = "not a hello";
    if (problem != nullptr) {
      drop(p, std::string("malformed hello (") + problem + ")", ErrorCode::ok);
      return Status::Ok();
    }
    if (p.hello.token_len > 0) {
      p.step = Pending::Step::reading_token;
      p.in_need = kHandshakeHeaderBytes + p.hello.token_len;
      return Status::Ok();
    }
  }
  const std::string token = p.in.substr(kHandshakeHeaderBytes);
  const std::uint32_t process = p.hello.process;
  const std::uint32_t channel = p.hello.channel;
  const std::string claimed = process < ctx_.processes.size() ? process_name(ctx_, process) : "process " + std::to_string(process);
  if (!constant_time_equal(token, ctx_.options->job_token)) {
    // A stranger, or a process of another job: that connection ends, setup carries on. If the
    // process we wait for is the one with the wrong token, the timeout message says so.
    notes_.push_back("a connection from " + p.remote + " claiming to be " + claimed + " on channel " +
                     std::to_string(channel) + " presented a wrong job token");
    if (notes_.size() > kMaxNotes) notes_.pop_front();
    drop(p, "claiming to be " + claimed + " on channel " + std::to_string(channel) + ": wrong job token",
         ErrorCode::auth_failure);
    return Status::Ok();
  }
  if (process >= ctx_.processes.size() || process >= ctx_.self || peer_pos_of_[process] < 0 || channel >= ctx_.channels) {
    drop(p, "hello from " + claimed + " on channel " + std::to_string(channel) + ", which is not expected to connect here",
         ErrorCode::protocol_error);
    return Status::Ok();
  }
  p.peer_pos = static_cast<std::size_t>(peer_pos_of_[process]);
  p.channel = channel;
  if (table_.has(p.peer_pos, channel)) {
    drop(p, "second hello from " + claimed + " on channel " + std::to_string(channel), ErrorCode::protocol_error);
    return Status::Ok();
  }
  HandshakeHeader answer;
  answer.kind = HandshakeKind::accept;
  answer.process = ctx_.self;
  answer.channel = channel;
  p.out = encode_handshake(answer);
  p.out_sent = 0;
  p.step = Pending::Step::writing;
  return watch(p, EPOLLOUT);
}

Status Handshaker::on_answer(Pending& p) {
  HandshakeHeader answer;
  const char* problem = decode_handshake(reinterpret_cast<const std::byte*>(p.in.data()), &answer);
  if (problem == nullptr && answer.kind == HandshakeKind::hello) problem = "a hello instead of an answer";
  if (problem == nullptr && (answer.process != ctx_.peers[p.peer_pos] || answer.channel != p.channel))
    problem = "an answer from another process or channel";
  if (problem != nullptr)
    return Status(ErrorCode::protocol_error, label(p) + " answered our tcp hello on channel " + std::to_string(p.channel) +
                                                 " with " + problem);
  if (answer.kind == HandshakeKind::reject) {
    const auto code = answer.code == static_cast<std::uint32_t>(ErrorCode::auth_failure) ? ErrorCode::auth_failure
                                                                                          : ErrorCode::protocol_error;
    return Status(code, label(p) + " rejected our tcp hello on channel " + std::to_string(p.channel) +
                            (code == ErrorCode::auth_failure ? ": wrong job token (SPARCOLL_JOB_TOKEN differs between the processes)"
                                                             : ": it did not expect this process or channel"));
  }
  return finish(p);
}

Status Handshaker::finish(Pending& p) {
  epoll_ctl(epoll_, EPOLL_CTL_DEL, p.fd, nullptr);
  table_.put(p.peer_pos, p.channel, p.fd, p.remote);
  p.fd = -1;
  if (!p.outgoing) --incoming_count_;
  --missing_;
  return Status::Ok();
}

// Closes a connection that failed its handshake, telling the far end why when we can.
void Handshaker::drop(Pending& p, const std::string& reason, ErrorCode reject_code, bool log) {
  if (log) warn_limited("dropping the tcp connection from " + p.remote + ": " + reason);
  if (reject_code != ErrorCode::ok) {
    HandshakeHeader answer;
    answer.kind = HandshakeKind::reject;
    answer.process = ctx_.self;
    answer.channel = p.hello.channel;
    answer.code = static_cast<std::uint32_t>(reject_code);
    const std::string bytes = encode_handshake(answer);
    // Best effort: 24 bytes fit any fresh socket buffer, and the connection is closed anyway.
    [[maybe_unused]] ssize_t sent = send(p.fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  epoll_ctl(epoll_, EPOLL_CTL_DEL, p.fd, nullptr);
  close(p.fd);
  p.fd = -1;
  if (!p.outgoing) --incoming_count_;
  free_slots_.push_back(p.tag);
}

Status Handshaker::timeout_error() const {
  std::string missing;
  for (std::size_t i = 0; i < ctx_.peers.size(); ++i) {
    std::string channels;
    std::uint32_t count = 0;
    for (std::uint32_t channel = 0; channel < ctx_.channels; ++channel) {
      if (table_.has(i, channel)) continue;
      channels += (count++ == 0 ? "" : ", ") + std::to_string(channel);
    }
    if (count == 0) continue;
    if (!missing.empty()) missing += ", ";
    missing += process_name(ctx_, ctx_.peers[i]) + (count == 1 ? " (channel " : " (channels ") + channels + ")";
  }
  std::string notes;
  for (const auto& note : notes_) notes += "; " + note;
  return Status(ErrorCode::timeout, "tcp setup timed out after " + std::to_string(deadline_.total_ms()) +
                                        " ms: no connection with " + missing + notes);
}

}  // namespace

Status establish_connections(const DriverContext& ctx, ConnectionTable* out) {
  Handshaker handshaker(ctx);
  return handshaker.run(out);
}

}  // namespace sparcoll::transport::tcp
