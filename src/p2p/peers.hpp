// Point-to-point messaging between workers for the algorithms that are not block-sparse
// aggregation (ring, butterfly, SparCML, Ok-Topk, broadcast, allgather, reduce-scatter).
//
// It runs on the collective thread, which owns the driver's last channel (the "collective
// channel"; the block-sparse progress threads own the others), so nothing here is shared or locked. An
// algorithm, a coroutine (common/task.hpp), posts the sends and receives of a step and then
// awaits all of them; whoever drives it (p2p/drive.hpp) polls the channel meanwhile:
//
//   peers.send(right, tag, chunk, bytes);
//   peers.recv_reduce(left, tag, acc, n, DataType::f32, op);
//   if (Status s = co_await peers.wait(); !s.ok()) co_return s;
//
// Messages are split into fragments of one transport message each; a fragment is copied (or
// reduced) straight into the posted destination. A fragment that arrives before its receive is
// posted (a faster peer is a step or a collective ahead) is kept in a stash whose buffers are
// reused, so steady-state operation allocates nothing; a buffer above 1 MiB is freed once its
// message is delivered, so a rare large early message does not stay allocated. Any failure (a dead peer, a timeout, a
// size that differs across ranks, a corrupt fragment) fails the collective with a message that
// names the peer, the collective and the step.
#pragma once

#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "p2p/mailbox.hpp"
#include "p2p/peer_wire.hpp"
#include "runtime/idle_policy.hpp"
#include "sparcoll/status.hpp"
#include "sparcoll/types.hpp"
#include "transport/driver.hpp"

namespace sparcoll::p2p {

using Clock = std::chrono::steady_clock;

class Peers {
 public:
  // `channel` is null when the job has a single worker. Workers are processes 0..size-1.
  Peers(transport::Channel* channel, std::uint32_t rank, std::uint32_t size, bool yield_when_waiting);
  // More busy threads than cores on this host (the idle policy yields at once).
  bool oversubscribed() const noexcept { return yield_; }

  std::uint32_t rank() const noexcept { return rank_; }
  std::uint32_t size() const noexcept { return size_; }
  // The current collective's name, for algorithms' own error messages.
  const std::string& what() const noexcept { return what_; }

  // Starts collective `seq`, named "<kind> <seq> (<algo>)" in errors (e.g. "allreduce op 7
  // (ring)"), whose collective_signature (peer_wire.hpp) and root every data fragment carries
  // and every peer's must match (root 0 for collectives without one). The name is composed into
  // a string that keeps its capacity from one collective to the next: no allocation per call.
  void begin(std::uint32_t seq, std::string_view kind, std::string_view algo, Clock::time_point deadline,
             std::uint32_t signature, std::uint32_t root = 0);
  // Added to every tag posted from now on in this collective, so that one collective can run
  // several algorithms one after another (the phases of a hybrid allreduce) without their
  // messages meeting: each algorithm numbers its tags from 0.
  void set_tag_base(std::uint32_t base) noexcept { tag_base_ = base; }

  // --- posting (non-blocking; buffers stay valid until the awaited wait() ends, and what a step
  // sends stays unchanged until then: a receive of the same step never writes into it, since
  // the transport may read it in place while the step runs) ---------------------------------
  void send(std::uint32_t peer, std::uint32_t tag, const void* data, std::size_t bytes);
  // One message of `head` followed by `data`, sent from the two buffers in place: a format's
  // header need not be copied in front of a tensor (block sets, block_set.hpp).
  void send(std::uint32_t peer, std::uint32_t tag, const void* head, std::size_t head_bytes, const void* data,
            std::size_t bytes);
  // Receives exactly `bytes`; another size is a mismatch error.
  void recv(std::uint32_t peer, std::uint32_t tag, void* dst, std::size_t bytes);
  // Receives `count` accumulator values (f32 or i32, see block/reduce.hpp) and combines them
  // into acc with `op` as they arrive.
  void recv_reduce(std::uint32_t peer, std::uint32_t tag, void* acc, std::size_t count, DataType acc_type, ReduceOp op);
  // Receives a message whose size the sender decides (at most max_bytes) into *dst, resized.
  void recv_any(std::uint32_t peer, std::uint32_t tag, std::vector<std::byte>* dst, std::size_t max_bytes);

  // From now until the collective ends, a message of this collective that no posted receive
  // takes is a disagreement between the ranks (a different root, a skipped call), failed at once
  // as a mismatch instead of being kept for a later step. For algorithms that post every
  // receive before its message can arrive (the broadcast tree).
  void expect_only_posted();

  // Awaited by an algorithm (common/task.hpp) after posting a step's sends and receives: the
  // algorithm resumes once every posted send has left and every posted receive is complete,
  // with the step's Status (a failure names the peer, the collective and the step).
  struct StepWait {
    Peers& peers;
    bool await_ready();
    void await_suspend(std::coroutine_handle<> waiter) noexcept;
    Status await_resume();
  };
  StepWait wait() { return StepWait{*this}; }
  // Awaited by the hybrid allreduce: resumes once `flag` is non-zero (its block-sparse half is
  // complete; whoever sets it wakes its futex). The channel is served meanwhile, as between
  // collectives.
  struct FlagWait {
    Peers& peers;
    const std::atomic<std::uint32_t>& flag;
    bool await_ready() const noexcept { return flag.load(std::memory_order_acquire) != 0; }
    void await_suspend(std::coroutine_handle<> waiter) noexcept;
    void await_resume() const noexcept {}
  };
  FlagWait wait_for(const std::atomic<std::uint32_t>& flag) { return FlagWait{*this, flag}; }

  // --- driving a suspended collective (p2p/drive.hpp) -----------------------------------------
  // Whether what the suspended collective awaits has happened: resume() it.
  bool ready();
  void resume();
  // One pass over the channel for what it awaits: sends, the mailbox, one poll; a step's
  // deadline. True when something moved (or the step ended).
  bool progress();
  // After a pass in which nothing moved: what the collective waits for (runtime/idle_policy.hpp).
  runtime::Idle idle() const noexcept;
  // Whether peers wait for this channel's polls to end their sends (transport::Channel): then a
  // thread that owns it keeps polling while it has nothing else to do.
  bool acknowledges_when_polled() const noexcept { return channel_ != nullptr && channel_->acknowledges_when_polled(); }

  // Whether the transport reads peers' memory in place (the direct algorithm), and the read:
  // `bytes` at `remote` in `peer`'s address space into `local`; errors name the collective.
  bool reads_peer_memory() const noexcept { return channel_ != nullptr && channel_->reads_peer_memory(); }
  Status read_peer_memory(std::uint32_t peer, std::uint64_t remote, void* local, std::size_t bytes);
  // Between collectives: one poll of the channel, so the driver acknowledges and retransmits
  // (a packet transport's peers cannot finish without this rank's acknowledgements) and what
  // faster peers sent for the next collective is stashed. True when something arrived; a
  // channel error is left for the next collective's wait() to report.
  bool poll_idle();
  // Tells every other worker that this collective failed (best effort), so they fail at once
  // instead of waiting for their deadline; they fail it with reason's code.
  void abort_all(const Status& reason);
  // After a failure that every rank learned of by an abort (invalid arguments, a size
  // mismatch): forget the collective, so the next one runs normally.
  void forget_failed();

  // Sends and receives outside collectives (send / recv): posted here, progressed by wait() and
  // poll_idle() whoever drives this object, their fragments taken out of the stream here.
  Mailbox& mailbox() noexcept { return mailbox_; }
  const Mailbox& mailbox() const noexcept { return mailbox_; }

  // The channel's packet counters so far (packet transports; zeros elsewhere).
  transport::ChannelCounters channel_counters() const { return channel_ != nullptr ? channel_->counters() : transport::ChannelCounters{}; }
  // Traffic of the current collective (headers included).
  std::uint64_t bytes_sent() const noexcept { return bytes_sent_; }
  std::uint64_t bytes_received() const noexcept { return bytes_received_; }
  std::uint64_t messages_sent() const noexcept { return messages_sent_; }
  std::uint64_t messages_received() const noexcept { return messages_received_; }
  // Bytes the stash holds allocated, in use or kept for reuse (tests, diagnostics).
  std::size_t stash_bytes() const noexcept;

 private:
  enum class RecvMode : std::uint8_t { copy, reduce, any };
  struct PendingSend {
    std::uint32_t peer, tag;
    const std::byte* head;  // the message's first head_bytes, then data's
    std::size_t head_bytes;
    const std::byte* data;
    std::size_t bytes, offset;  // bytes: the whole message's, head included
    bool started;
  };
  struct PostedRecv {
    std::uint32_t peer, tag;
    RecvMode mode;
    std::byte* dst;
    std::vector<std::byte>* any;
    std::size_t bytes;       // expected (copy, reduce) or the limit (any)
    std::size_t received;
    std::size_t total;       // from the first fragment; SIZE_MAX until then
    DataType acc_type;
    ReduceOp op;
    bool done;
  };
  struct Stashed {
    std::uint32_t peer, seq, tag;
    std::uint32_t signature, root;
    std::uint64_t total;
    std::size_t received;
    std::vector<std::byte> data;  // capacity reused across collectives
    bool used;
  };

  void post(PostedRecv r);
  bool progress_sends();
  // Every posted send has left and every posted receive is complete, or the collective failed.
  bool step_complete();
  // What the suspended collective awaits (StepWait, FlagWait), and how long it waited.
  enum class Awaiting : std::uint8_t { nothing, step, flag };
  Awaiting awaiting_ = Awaiting::nothing;
  std::coroutine_handle<> waiter_;
  const std::atomic<std::uint32_t>* flag_ = nullptr;
  bool step_done_ = false;  // the awaited step was complete at the last progress()
  std::uint32_t idle_ = 0;  // passes in a row in which nothing moved
  // Handles one received fragment; false when it failed the collective.
  bool on_message(const transport::ReceivedMessage& msg);
  bool on_abort(std::uint32_t from, const PeerMessage& m);
  bool on_collective_fragment(std::uint32_t from, const PeerHeader& h, const std::byte* payload, std::size_t len);
  bool stash_fragment(std::uint32_t from, const PeerHeader& h, const std::byte* payload, std::size_t len);
  bool deliver(PostedRecv& r, std::uint64_t total, std::uint64_t offset, const std::byte* payload, std::size_t len);
  bool check_total(PostedRecv& r, std::uint64_t total);
  Stashed& stash_slot();
  // The mismatch expect_only_posted() reports for an unposted message from `peer`.
  void fail_unexpected(std::uint32_t peer, std::uint32_t tag);
  // Frees a stash slot once its message is delivered or dropped; keeps its buffer if small.
  void release(Stashed& s);
  void fail(Status s);
  // What the current collective still waits for ("no data from rank 2 for ... step 1"), or "".
  std::string waiting_for() const;
  std::string peer_name(std::uint32_t p) const { return "rank " + std::to_string(p); }
  std::string step_name(std::uint32_t tag) const { return what_ + " step " + std::to_string(tag); }

  transport::Channel* channel_;
  std::uint32_t rank_, size_;
  bool yield_;
  bool sends_in_place_ = false;  // the channel reads what a step sends in place (tcp)
  std::size_t fragment_payload_ = 0;  // bytes of payload per fragment (a multiple of 8)

  // The current collective; "-1" before the first, so what arrives before it begins is early,
  // not taken for the current one (an abort taken so would be lost when it begins).
  std::uint32_t seq_ = UINT32_MAX;
  std::uint32_t signature_ = 0, root_ = 0;
  // The mismatch error for a fragment of this collective whose signature or root is not ours.
  void fail_signature(std::uint32_t peer, std::uint32_t theirs, std::uint32_t their_root);
  std::string what_;
  Clock::time_point deadline_;
  Status failure_;
  bool failed_ = false;
  bool only_posted_ = false;  // expect_only_posted() for the current collective
  std::uint32_t tag_base_ = 0;
  // Aborts that arrived for collectives not started yet.
  struct EarlyAbort {
    std::uint32_t seq;
    ErrorCode code;
    std::string reason;
  };
  std::vector<EarlyAbort> early_aborts_;
  // Collectives that failed by an abort on every rank: fragments of them still in flight are
  // dropped when they arrive, not taken for a protocol violation.
  std::vector<std::uint32_t> failed_seqs_;
  bool seq_failed(std::uint32_t seq) const;

  Mailbox mailbox_;
  std::vector<PendingSend> sends_;
  std::vector<PostedRecv> recvs_;
  std::vector<Stashed> stash_;
  std::uint64_t bytes_sent_ = 0, bytes_received_ = 0, messages_sent_ = 0, messages_received_ = 0;
};

// The accumulator type a dtype reduces in (block/reduce.hpp): i32 for i32, the 64-bit types
// themselves, f32 for the rest.
constexpr DataType acc_type_of(DataType t) noexcept {
  return t == DataType::i32 || dtype_is_wide(t) ? t : DataType::f32;
}

}  // namespace sparcoll::p2p
