// Point-to-point messages outside collectives: send and recv between two ranks, with a tag,
// and receives from any source. Matched as MPI and torch.distributed match them: per sender in
// the order it sent them, a receive taking the first message (from its source, or from anyone)
// with its tag. They live beside the collectives on the collective channel (`Peers` hands this
// class their fragments, PeerKind::p2p) without taking part in their sequence: only the two
// ranks call them, so they never number collectives, and a pending receive never blocks the
// collective thread (a rank may start a receive, then a collective the sender must join first).
//
// A message arriving before its receive is posted is kept whole (allocated for its size, freed
// once taken: only messages nobody has received yet use memory). One arriving for a posted
// receive goes straight into its buffer. A size that differs from the receive's, or a deadline
// that passes, fails that send or receive alone; the communicator goes on.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "p2p/peer_wire.hpp"
#include "common/request_state.hpp"
#include "sparcoll/communicator.hpp"  // kAnySource
#include "sparcoll/status.hpp"
#include "transport/driver.hpp"

namespace sparcoll::p2p {

class Mailbox {
 public:
  using Clock = std::chrono::steady_clock;
  Mailbox(std::uint32_t rank, std::uint32_t size);

  // The request completes once the message has gone to the channel (send), or has arrived
  // whole in `data` (recv; *source then says who sent it, when source is not null). The
  // buffers stay valid until then.
  void post_send(std::uint32_t peer, std::uint32_t tag, const void* data, std::size_t bytes,
                 std::shared_ptr<detail::RequestState> request, Clock::time_point deadline);
  void post_recv(std::int32_t peer, std::uint32_t tag, void* data, std::size_t bytes, std::int32_t* source,
                 std::shared_ptr<detail::RequestState> request, Clock::time_point deadline);

  // Something is posted and not finished (the collective thread keeps polling meanwhile).
  bool busy() const noexcept { return !sends_.empty() || !recvs_.empty(); }
  // Gives the channel what it takes of the posted sends, each peer's in order; true when
  // something moved. A send the channel refuses with an error fails every posted op.
  bool progress(transport::Channel& channel);
  // One received fragment of a p2p message (parse_peer_message accepted it; from < size).
  void on_fragment(std::uint32_t from, const PeerHeader& h, const std::byte* payload, std::size_t len);
  // Fails the sends and receives whose deadline passed.
  void expire(Clock::time_point now);
  // Every posted send and receive fails with `why` (a dead channel, the communicator's end).
  void fail_all(const Status& why);

  // Traffic so far (headers included), for the communicator's counters.
  std::uint64_t bytes_sent() const noexcept { return bytes_sent_; }
  std::uint64_t bytes_received() const noexcept { return bytes_received_; }
  std::uint64_t messages_sent() const noexcept { return messages_sent_; }
  std::uint64_t messages_received() const noexcept { return messages_received_; }
  // Bytes held by messages that arrived before their receive (tests).
  std::size_t unclaimed_bytes() const noexcept;

 private:
  struct Send {
    std::uint32_t peer, tag, seq;
    const std::byte* data;
    std::size_t bytes, offset;
    bool started;
    std::shared_ptr<detail::RequestState> request;
    Clock::time_point deadline;
  };
  struct Recv {
    std::int32_t peer;  // or kAnySource
    std::uint32_t tag;
    std::byte* dst;
    std::size_t bytes;
    std::int32_t* source;
    std::shared_ptr<detail::RequestState> request;
    Clock::time_point deadline;
  };
  // A message that has begun to arrive: bound to a receive (straight into its buffer), or
  // buffered until one is posted, or discarded (its receive failed on its size).
  struct Incoming {
    std::uint32_t from, seq, tag;
    std::uint64_t total, received;
    std::vector<std::byte> data;  // unbound only
    bool bound, discard;
    Recv recv;  // when bound
  };

  static bool matches(const Recv& r, std::uint32_t from, std::uint32_t tag) noexcept {
    return (r.peer == kAnySource || static_cast<std::uint32_t>(r.peer) == from) && r.tag == tag;
  }
  // The failure of a receive whose message has another size than its buffer.
  static Status size_mismatch(const Recv& r, std::uint32_t from, std::uint64_t total);
  static void complete(detail::RequestState& request, const Status& status);
  void take(Incoming& m, Recv r);  // m's first bytes into r, bound from now on

  std::uint32_t rank_, size_;
  std::vector<std::uint32_t> next_seq_;  // per destination: the next message's number
  std::vector<Send> sends_;              // in posting order
  std::vector<Recv> recvs_;              // in posting order, none with a match in incoming_
  std::vector<Incoming> incoming_;       // in arrival order
  std::uint64_t bytes_sent_ = 0, bytes_received_ = 0, messages_sent_ = 0, messages_received_ = 0;
};

}  // namespace sparcoll::p2p
