#include "p2p/peers.hpp"

#include <sched.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <iterator>
#include <thread>

#include "common/failure_scope.hpp"
#include "block/reduce.hpp"

namespace sparcoll::p2p {

namespace {
constexpr int kPollBatch = 32;
}  // namespace

namespace {

// A stash buffer is kept for the next early message only up to this size. A larger one (a
// faster peer a whole large collective ahead) would otherwise stay allocated for the
// communicator's life at the largest size ever stashed, and memory would step up whenever a
// peer happened to run further ahead than before (sparcoll-soak saw +1 to +7.5 MiB after
// warm-up). Freeing it costs one allocation per large early message, small beside its copy.
constexpr std::size_t kStashKeepBytes = std::size_t{1} << 20;

}  // namespace

Peers::Peers(transport::Channel* channel, std::uint32_t rank, std::uint32_t size, bool yield_when_waiting)
    : channel_(channel), rank_(rank), size_(size), yield_(yield_when_waiting), mailbox_(rank, size) {
  if (channel_ != nullptr) fragment_payload_ = (channel_->max_message() - sizeof(PeerHeader)) / 8 * 8;
  sends_in_place_ = channel_ != nullptr && channel_->sends_any_memory_in_place();
  sends_.reserve(64);
  recvs_.reserve(64);
}

void Peers::begin(std::uint32_t seq, std::string_view kind, std::string_view algo, Clock::time_point deadline,
                  std::uint32_t signature, std::uint32_t root) {
  seq_ = seq;
  signature_ = signature;
  root_ = root;
  char digits[16];
  what_.assign(kind);
  what_ += ' ';
  what_.append(digits, std::to_chars(digits, digits + sizeof digits, seq).ptr);
  what_ += " (";
  what_ += algo;
  what_ += ')';
  deadline_ = deadline;
  failed_ = false;
  only_posted_ = false;
  tag_base_ = 0;
  failure_ = Status();
  sends_.clear();
  recvs_.clear();
  bytes_sent_ = bytes_received_ = messages_sent_ = messages_received_ = 0;
  // Stashed fragments of collectives before this one: the rest of failed ones (dropped), or a
  // message that a collective this rank finished had no receive for (only when ranks disagree,
  // e.g. on the root: an error, never silently ignored).
  for (Stashed& st : stash_) {
    if (!st.used || static_cast<std::int32_t>(st.seq - seq) >= 0) continue;
    release(st);
    if (!seq_failed(st.seq))
      fail(Status(ErrorCode::mismatch, what_ + ": " + peer_name(st.peer) + " sent message " + std::to_string(st.tag) +
                                           " of collective " + std::to_string(st.seq) +
                                           ", which this rank finished without receiving it (count, root or "
                                           "algorithm differ across ranks?)"));
  }
  for (std::size_t i = 0; i < early_aborts_.size(); ++i)
    if (early_aborts_[i].seq == seq) {
      fail(Status(early_aborts_[i].code, what_ + ": " + early_aborts_[i].reason));
      early_aborts_.erase(early_aborts_.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  // A faster peer's fragments of this collective are checked now, not when a receive takes
  // them: a disagreement on the root is then reported as such, not as an unexpected message.
  if (!failed_)
    for (const Stashed& st : stash_)
      if (st.used && st.seq == seq && (st.signature != signature_ || st.root != root_))
        return fail_signature(st.peer, st.signature, st.root);
}

void Peers::expect_only_posted() {
  only_posted_ = true;
  // What arrived before this rank began the collective and no receive took.
  for (const Stashed& s : stash_)
    if (s.used && s.seq == seq_) return fail_unexpected(s.peer, s.tag);
}

void Peers::fail_unexpected(std::uint32_t peer, std::uint32_t tag) {
  fail(Status(ErrorCode::mismatch, what_ + ": " + peer_name(peer) + " sent message " + std::to_string(tag) +
                                       ", which this rank does not expect from it (the ranks disagree on the "
                                       "collective's arguments: a broadcast's root?)"));
}

bool Peers::seq_failed(std::uint32_t seq) const {
  for (std::uint32_t f : failed_seqs_)
    if (f == seq) return true;
  return false;
}

void Peers::forget_failed() {
  if (failed_seqs_.size() >= 64) failed_seqs_.erase(failed_seqs_.begin());
  failed_seqs_.push_back(seq_);
}

void Peers::fail(Status s) {
  if (failed_) return;
  failed_ = true;
  failure_ = std::move(s);
  // The collective ends now, and its caller takes its buffers back while frames read in place
  // may still be queued for a peer that is slow, stuck or about to abort too.
  if (sends_in_place_) channel_->stop_reading_user_memory();
}

void Peers::send(std::uint32_t peer, std::uint32_t tag, const void* data, std::size_t bytes) {
  send(peer, tag, nullptr, 0, data, bytes);
}

void Peers::send(std::uint32_t peer, std::uint32_t tag, const void* head, std::size_t head_bytes, const void* data,
                 std::size_t bytes) {
  if (peer >= size_ || peer == rank_ || channel_ == nullptr) {
    fail(Status(ErrorCode::internal, step_name(tag) + ": send to " + peer_name(peer) + " from rank " +
                                         std::to_string(rank_) + " of " + std::to_string(size_)));
    return;
  }
  sends_.push_back(PendingSend{peer, tag_base_ + tag, static_cast<const std::byte*>(head), head_bytes,
                               static_cast<const std::byte*>(data), head_bytes + bytes, 0, false});
}

void Peers::recv(std::uint32_t peer, std::uint32_t tag, void* dst, std::size_t bytes) {
  post(PostedRecv{peer, tag, RecvMode::copy, static_cast<std::byte*>(dst), nullptr, bytes, 0, SIZE_MAX,
                  DataType::f32, ReduceOp::sum, false});
}

void Peers::recv_reduce(std::uint32_t peer, std::uint32_t tag, void* acc, std::size_t count, DataType acc_type,
                        ReduceOp op) {
  post(PostedRecv{peer, tag, RecvMode::reduce, static_cast<std::byte*>(acc), nullptr, count * block::acc_size(acc_type), 0,
                  SIZE_MAX,
                  acc_type, op, false});
}

void Peers::recv_any(std::uint32_t peer, std::uint32_t tag, std::vector<std::byte>* dst, std::size_t max_bytes) {
  post(PostedRecv{peer, tag, RecvMode::any, nullptr, dst, max_bytes, 0, SIZE_MAX, DataType::f32, ReduceOp::sum,
                  false});
}

void Peers::post(PostedRecv r) {
  r.tag += tag_base_;
  if (r.peer >= size_ || r.peer == rank_ || channel_ == nullptr) {
    fail(Status(ErrorCode::internal, step_name(r.tag) + ": receive from " + peer_name(r.peer) + " on rank " +
                                         std::to_string(rank_) + " of " + std::to_string(size_)));
    return;
  }
  recvs_.push_back(r);
  PostedRecv& posted = recvs_.back();
  // A faster peer may have sent it already.
  for (Stashed& s : stash_) {
    if (!s.used || s.peer != r.peer || s.seq != seq_ || s.tag != r.tag) continue;
    if (s.signature != signature_ || s.root != root_) {
      fail_signature(s.peer, s.signature, s.root);
      return;
    }
    if (!check_total(posted, s.total)) return;
    // The stash holds a prefix [0, received) in order: the transport delivers a peer's
    // fragments in order.
    if (s.received > 0 || s.total == 0) (void)deliver(posted, s.total, 0, s.data.data(), s.received);
    release(s);
    return;
  }
}

bool Peers::check_total(PostedRecv& r, std::uint64_t total) {
  if (r.total != SIZE_MAX) {
    if (total == r.total) return true;
    fail(Status(ErrorCode::protocol_error, step_name(r.tag) + ": " + peer_name(r.peer) + " changed the message size from " +
                                               std::to_string(r.total) + " to " + std::to_string(total) + " bytes"));
    return false;
  }
  const bool exact = r.mode != RecvMode::any;
  if ((exact && total != r.bytes) || (!exact && total > r.bytes)) {
    fail(Status(ErrorCode::mismatch, step_name(r.tag) + ": " + peer_name(r.peer) + " sent " + std::to_string(total) +
                                         " bytes, this rank expected " + (exact ? "" : "at most ") +
                                         std::to_string(r.bytes) +
                                         " (count, dtype, root or algorithm differ across ranks?)"));
    return false;
  }
  if (r.mode == RecvMode::reduce && total % block::acc_size(r.acc_type) != 0) {
    fail(Status(ErrorCode::protocol_error, step_name(r.tag) + ": " + peer_name(r.peer) + " sent " +
                                               std::to_string(total) + " bytes of " +
                                               std::to_string(block::acc_size(r.acc_type)) + "-byte accumulators"));
    return false;
  }
  r.total = total;
  if (r.mode == RecvMode::any) r.any->resize(total);
  return true;
}

bool Peers::deliver(PostedRecv& r, std::uint64_t total, std::uint64_t offset, const std::byte* payload,
                    std::size_t len) {
  if (!check_total(r, total)) return false;
  if (offset != r.received || offset + len > total) {
    fail(Status(ErrorCode::protocol_error, step_name(r.tag) + ": " + peer_name(r.peer) + " sent bytes [" +
                                               std::to_string(offset) + ", +" + std::to_string(len) + ") of " +
                                               std::to_string(total) + " out of order (expected offset " +
                                               std::to_string(r.received) + ")"));
    return false;
  }
  switch (r.mode) {
    case RecvMode::copy:
      if (len) std::memcpy(r.dst + offset, payload, len);
      break;
    case RecvMode::any:
      if (len) std::memcpy(r.any->data() + offset, payload, len);
      break;
    case RecvMode::reduce: {
      const std::size_t es = block::acc_size(r.acc_type);
      if (offset % es != 0 || len % es != 0) {
        fail(Status(ErrorCode::protocol_error, step_name(r.tag) + ": " + peer_name(r.peer) +
                                                   " split accumulators at byte " + std::to_string(offset)));
        return false;
      }
      block::acc_reduce(r.acc_type, r.op, payload, r.dst + offset, len / es);
      break;
    }
  }
  r.received += len;
  r.done = r.received == total;
  return true;
}

void Peers::release(Stashed& s) {
  s.used = false;
  if (s.data.capacity() > kStashKeepBytes) std::vector<std::byte>().swap(s.data);
}

namespace {

// "allreduce ring f32 sum" from a collective_signature (CollKind's order, executor.cpp).
std::string describe_signature(std::uint32_t sig) {
  static constexpr const char* kKinds[] = {"allreduce",        "broadcast",            "allgather",
                                           "reduce_scatter",   "allreduce_sparse",     "allreduce_compressed",
                                           "hybrid allreduce", "reduce",               "gather",
                                           "scatter",          "send",                 "recv",
                                           "all_to_all"};
  const std::uint32_t kind = sig >> 24 & 0x7f;
  const auto algo = static_cast<std::uint8_t>(sig >> 16), dtype = static_cast<std::uint8_t>(sig >> 8),
             op = static_cast<std::uint8_t>(sig);
  std::string s = kind < std::size(kKinds) ? kKinds[kind] : "kind " + std::to_string(kind);
  s += std::string(" ") + std::string(algorithm_name(static_cast<Algorithm>(algo)));
  s += std::string(" ") + (dtype_valid(dtype) ? std::string(dtype_name(static_cast<DataType>(dtype))) : "dtype " + std::to_string(dtype));
  s += std::string(" ") + (reduce_op_valid(op) ? std::string(reduce_op_name(static_cast<ReduceOp>(op))) : "op " + std::to_string(op));
  return s;
}

}  // namespace

void Peers::fail_signature(std::uint32_t peer, std::uint32_t theirs, std::uint32_t their_root) {
  if (theirs == signature_) {
    fail(Status(ErrorCode::mismatch, what_ + ": " + peer_name(peer) + " runs it with root " +
                                         std::to_string(their_root) + ", this rank with root " + std::to_string(root_) +
                                         " (the root differs across ranks)"));
    return;
  }
  fail(Status(ErrorCode::mismatch, what_ + ": " + peer_name(peer) + " runs " + describe_signature(theirs) +
                                       ", this rank " + describe_signature(signature_) +
                                       " (the call, its algorithm, dtype or op differ across ranks)"));
}

std::size_t Peers::stash_bytes() const noexcept {
  std::size_t bytes = 0;
  for (const Stashed& s : stash_) bytes += s.data.capacity();
  return bytes;
}

Peers::Stashed& Peers::stash_slot() {
  for (Stashed& s : stash_)
    if (!s.used) return s;
  stash_.emplace_back();
  return stash_.back();
}

bool Peers::on_message(const transport::ReceivedMessage& msg) {
  const std::uint32_t from = msg.peer;
  PeerMessage m;
  const PeerParse parsed = parse_peer_message(msg.data, msg.size, &m);
  if (parsed == PeerParse::too_short) {
    fail(Status(ErrorCode::protocol_error, what_ + ": " + peer_name(from) + " sent a " + std::to_string(msg.size) +
                                               "-byte message, shorter than the " + std::to_string(sizeof(PeerHeader)) + "-byte peer header"));
    return false;
  }
  const PeerHeader& h = m.header;
  ++messages_received_;
  bytes_received_ += msg.size;
  if (from >= size_) {
    fail(Status(ErrorCode::protocol_error, what_ + ": process " + std::to_string(from) +
                                               " (not a worker) sent a peer message"));
    return false;
  }
  if (parsed == PeerParse::bad_magic) {
    fail(Status(ErrorCode::protocol_error, what_ + ": " + peer_name(from) + " sent a message with magic 0x" +
                                               [&] {
                                                 char b[16];
                                                 std::snprintf(b, sizeof b, "%08x", h.magic);
                                                 return std::string(b);
                                               }() +
                                               " version " + std::to_string(h.version) +
                                               " (expected a sparcoll peer message, version " + std::to_string(kPeerVersion) + ")"));
    return false;
  }
  if (parsed == PeerParse::ok && h.kind == static_cast<std::uint8_t>(PeerKind::abort)) return on_abort(from, m);
  if (parsed == PeerParse::bad_kind) {
    fail(Status(ErrorCode::protocol_error, what_ + ": " + peer_name(from) + " sent unknown message kind " +
                                               std::to_string(h.kind)));
    return false;
  }
  const std::size_t len = msg.size - sizeof(PeerHeader);
  if (parsed == PeerParse::bad_range) {
    fail(Status(ErrorCode::protocol_error, what_ + ": " + peer_name(from) + " sent bytes [" + std::to_string(h.offset) +
                                               ", +" + std::to_string(len) + ") of a " + std::to_string(h.total) +
                                               "-byte message"));
    return false;
  }
  const std::byte* payload = m.payload;
  if (h.kind == static_cast<std::uint8_t>(PeerKind::p2p)) {
    mailbox_.on_fragment(from, h, payload, len);  // outside collectives: never this one's business
    return true;
  }
  return on_collective_fragment(from, h, payload, len);
}

// A peer failed a collective: this one (fail it, naming the peer and its reason), or a later one
// (remembered, up to 64, for when this rank gets there).
bool Peers::on_abort(std::uint32_t from, const PeerMessage& m) {
  const PeerHeader& h = m.header;
  const std::string reason = abort_reason_text(m.payload, m.len);
  // The sender's error code travels in `tag`. The op-level ones are kept, so every rank reports
  // one bad argument the same way (as block-sparse aborts do) and the executor forgets the
  // collective instead of breaking; anything else is a peer failure.
  const auto sent = static_cast<ErrorCode>(h.tag);
  const bool known = h.tag <= static_cast<std::uint32_t>(ErrorCode::broken);
  const ErrorCode code = known && fails_only_the_collective(sent) ? sent
                         : sent == ErrorCode::timeout               ? ErrorCode::timeout
                                                                    : ErrorCode::peer_failure;
  if (h.seq == seq_ && !failed_) {
    // A peer's deadline passed first: say whom this rank waits for too, so every rank names
    // the rank it waited for (the stalled one, for its neighbours), not only the first to time out.
    const std::string waiting = code == ErrorCode::timeout ? waiting_for() : std::string();
    fail(Status(code, what_ + ": " + (waiting.empty() ? "" : waiting + "; ") + peer_name(from) +
                          " failed it: " + reason));
    return false;
  }
  if (static_cast<std::int32_t>(h.seq - seq_) > 0 && early_aborts_.size() < 64)
    early_aborts_.push_back(EarlyAbort{h.seq, code, peer_name(from) + " failed it: " + reason});
  return true;
}

// A fragment of a collective's message: delivered to the posted recv it belongs to, or stashed
// until that recv is posted; one of a finished or failed collective is dropped or named.
bool Peers::on_collective_fragment(std::uint32_t from, const PeerHeader& h, const std::byte* payload, std::size_t len) {
  if (static_cast<std::int32_t>(h.seq - seq_) < 0 || (h.seq == seq_ && failed_)) {
    if (seq_failed(h.seq) || h.seq == seq_) return true;  // the rest of a failed collective
    fail(Status(ErrorCode::protocol_error, what_ + ": " + peer_name(from) + " sent data for collective " +
                                               std::to_string(h.seq) + ", which this rank finished already"));
    return false;
  }
  if (h.seq == seq_ && (h.signature != signature_ || h.root != root_)) {
    fail_signature(from, h.signature, h.root);
    return false;
  }
  if (h.seq == seq_) {
    for (PostedRecv& r : recvs_)
      if (!r.done && r.peer == from && r.tag == h.tag) return deliver(r, h.total, h.offset, payload, len);
    if (only_posted_) {
      fail_unexpected(from, h.tag);
      return false;
    }
  }
  return stash_fragment(from, h, payload, len);
}

// Not posted yet: keep it (in order, per peer) until it is.
bool Peers::stash_fragment(std::uint32_t from, const PeerHeader& h, const std::byte* payload, std::size_t len) {
  Stashed* s = nullptr;
  for (Stashed& e : stash_)
    if (e.used && e.peer == from && e.seq == h.seq && e.tag == h.tag) s = &e;
  if (s == nullptr) {
    s = &stash_slot();
    s->used = true;
    s->peer = from;
    s->seq = h.seq;
    s->tag = h.tag;
    s->signature = h.signature;
    s->root = h.root;
    s->total = h.total;
    s->received = 0;
  }
  if (h.offset != s->received || h.total != s->total) {
    fail(Status(ErrorCode::protocol_error, what_ + ": " + peer_name(from) + " sent bytes [" + std::to_string(h.offset) +
                                               ", +" + std::to_string(len) + ") of message " + std::to_string(h.tag) +
                                               " of collective " + std::to_string(h.seq) + " out of order"));
    return false;
  }
  if (s->data.size() < s->received + len) s->data.resize(std::max(s->received + len, s->data.size() * 2));
  if (len) std::memcpy(s->data.data() + s->received, payload, len);
  s->received += len;
  return true;
}

bool Peers::progress_sends() {
  bool moved = false;
  for (PendingSend& s : sends_) {
    while (!failed_ && (s.offset < s.bytes || !s.started)) {
      const std::size_t len = std::min(fragment_payload_, s.bytes - s.offset);
      PeerHeader h{kPeerMagic, kPeerVersion, static_cast<std::uint8_t>(PeerKind::data), 0, signature_, root_, seq_,
                   s.tag, s.bytes, s.offset};
      // The fragment's bytes [offset, offset + len): the part of them in the head, then data's.
      struct iovec iov[3] = {{&h, sizeof h}, {nullptr, 0}, {nullptr, 0}};
      int iovcnt = 1;
      const std::size_t from_head = s.offset < s.head_bytes ? std::min(len, s.head_bytes - s.offset) : 0;
      if (from_head) iov[iovcnt++] = {const_cast<std::byte*>(s.head + s.offset), from_head};
      if (len > from_head)
        iov[iovcnt++] = {const_cast<std::byte*>(s.data + (s.offset + from_head - s.head_bytes)), len - from_head};
      // The step ends only once the channel is flushed (step_complete), and until then the
      // algorithm leaves what it sends unchanged: a transport that can may read it in place.
      const transport::SendResult r =
          sends_in_place_
              ? channel_->send(s.peer, iov, iovcnt, transport::UserMemory{s.data, s.bytes - s.head_bytes, 0})
              : channel_->send(s.peer, iov, iovcnt);
      if (r == transport::SendResult::no_resource) break;
      if (r == transport::SendResult::error) {
        fail(Status(ErrorCode::peer_failure, what_ + ": sending to " + peer_name(s.peer) + " failed: " +
                                                 channel_->error().message()));
        return moved;
      }
      s.started = true;
      s.offset += len;
      bytes_sent_ += sizeof h + len;
      ++messages_sent_;
      moved = true;
    }
  }
  return moved;
}

bool Peers::step_complete() {
  if (failed_) return true;
  bool sends_done = true;
  for (const PendingSend& s : sends_) sends_done = sends_done && s.started && s.offset == s.bytes;
  // Queued is not sent: a driver may hold data (tcp's send queue) until poll() pushes it out,
  // and nobody polls this channel between collectives. Asked whenever the sends have left,
  // even while receives are pending: tcp's flushed() also pushes its queues out.
  if (sends_done && !sends_.empty()) sends_done = channel_->flushed();
  if (!sends_done) return false;
  for (const PostedRecv& r : recvs_)
    if (!r.done) return false;
  return true;
}

bool Peers::StepWait::await_ready() {
  // The step's sends start now; one that needs nothing more (no receive, the bytes gone)
  // continues without suspending.
  if (!peers.failed_) {
    (void)peers.progress_sends();
    if (peers.mailbox_.busy()) (void)peers.mailbox_.progress(*peers.channel_);
  }
  return peers.step_complete();
}

void Peers::StepWait::await_suspend(std::coroutine_handle<> waiter) noexcept {
  peers.waiter_ = waiter;
  peers.awaiting_ = Awaiting::step;
  peers.step_done_ = false;  // await_ready() just found it incomplete
  peers.idle_ = 0;
}

Status Peers::StepWait::await_resume() {
  peers.awaiting_ = Awaiting::nothing;
  if (peers.failed_) return peers.failure_;
  peers.sends_.clear();
  peers.recvs_.clear();
  return Status();
}

void Peers::FlagWait::await_suspend(std::coroutine_handle<> waiter) noexcept {
  peers.waiter_ = waiter;
  peers.awaiting_ = Awaiting::flag;
  peers.flag_ = &flag;
}

bool Peers::ready() {
  switch (awaiting_) {
    case Awaiting::step: return step_done_;  // as of the last progress(): step_complete() may cost a syscall
    case Awaiting::flag: return flag_->load(std::memory_order_acquire) != 0;
    case Awaiting::nothing: break;
  }
  return false;
}

void Peers::resume() {
  const std::coroutine_handle<> waiter = std::exchange(waiter_, nullptr);
  awaiting_ = Awaiting::nothing;
  waiter.resume();
}

bool Peers::progress() {
  if (awaiting_ != Awaiting::step) return poll_idle();
  if (failed_) return step_done_ = true;
  bool moved = progress_sends();
  if (mailbox_.busy()) moved = mailbox_.progress(*channel_) || moved;
  step_done_ = step_complete();
  if (step_done_) return true;
  transport::ReceivedMessage msgs[kPollBatch];
  const int n = channel_->poll(msgs, kPollBatch);
  if (n < 0) {
    fail(Status(ErrorCode::peer_failure, what_ + ": " + channel_->error().message()));
    mailbox_.fail_all(Status(ErrorCode::peer_failure, channel_->error().message()));
    return step_done_ = true;
  }
  // Every message of the batch is handled, even after one failed the collective: the rest may
  // be a faster peer's fragments of the next collective (stashed now, or lost for good, and
  // that collective would wait for them until its deadline) or its abort.
  for (int i = 0; i < n; ++i) (void)on_message(msgs[i]);
  step_done_ = failed_;  // a failure ends the step now; completion is seen by the next pass
  if (moved || n > 0) {
    idle_ = 0;
    return true;
  }
  ++idle_;
  if ((idle_ & 255) == 0 && mailbox_.busy()) mailbox_.expire(Clock::now());
  if ((idle_ & 255) == 0 && Clock::now() > deadline_) {
    fail(Status(ErrorCode::timeout, what_ + ": deadline passed (SPARCOLL_DEADLINE_MS): " + waiting_for()));
    return step_done_ = true;
  }
  return false;
}

runtime::Idle Peers::idle() const noexcept {
  // The hybrid's block-sparse half ends on another thread, which wakes the flag: sleeping on it
  // rather than yielding leaves oversubscribed cores to the progress threads doing that work.
  if (awaiting_ == Awaiting::flag)
    return runtime::Idle{runtime::Waiting::other_thread, flag_, acknowledges_when_polled()};
  return runtime::Idle{runtime::Waiting::op_in_flight, nullptr};
}

std::string Peers::waiting_for() const {
  for (const PostedRecv& r : recvs_)
    if (!r.done) return "no data from " + peer_name(r.peer) + " for " + step_name(r.tag);
  for (const PendingSend& s : sends_)
    if (s.offset < s.bytes || !s.started) return peer_name(s.peer) + " took no data for " + step_name(s.tag);
  return std::string();
}

bool Peers::poll_idle() {
  if (channel_ == nullptr) return false;
  const bool sent = mailbox_.busy() && mailbox_.progress(*channel_);
  transport::ReceivedMessage msgs[kPollBatch];
  const int n = channel_->poll(msgs, kPollBatch);
  if (n < 0 && mailbox_.busy()) mailbox_.fail_all(Status(ErrorCode::peer_failure, channel_->error().message()));
  if (mailbox_.busy()) mailbox_.expire(Clock::now());
  if (n <= 0) return sent;
  for (int i = 0; i < n; ++i) (void)on_message(msgs[i]);
  return true;
}

void Peers::abort_all(const Status& reason) {
  if (channel_ == nullptr) return;
  fail(reason);  // failed arguments fail before wait(): the collective's own fragments are dropped
  const std::string text = "rank " + std::to_string(rank_) + ": " + reason.message().substr(0, 900);
  PeerHeader h{kPeerMagic, kPeerVersion, static_cast<std::uint8_t>(PeerKind::abort), 0, 0, 0, seq_,
               static_cast<std::uint32_t>(reason.code()), text.size(), 0};
  for (std::uint32_t p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    struct iovec iov[2] = {{&h, sizeof h}, {const_cast<char*>(text.data()), text.size()}};
    // Best effort: a peer whose ring stays full for a while hits its own deadline instead.
    for (int attempt = 0; attempt < 1000; ++attempt) {
      const transport::SendResult r = channel_->send(p, iov, 2);
      if (r != transport::SendResult::no_resource) break;
      // Receiving makes room on some transports; what arrives is handled like in wait() (this
      // collective's fragments dropped, the next one's stashed), never thrown away.
      transport::ReceivedMessage msgs[kPollBatch];
      const int n = channel_->poll(msgs, kPollBatch);
      if (n < 0) break;
      for (int i = 0; i < n; ++i) (void)on_message(msgs[i]);
      sched_yield();
    }
  }
}

}  // namespace sparcoll::p2p
