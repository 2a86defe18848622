// The collectives that move bytes directly between ranks. all_to_all: every rank's piece for
// every other straight to it, one message each way per pair (no rank returns before its own
// pieces arrived; a piece of another size than its receiver expects is a `mismatch`).
//
// gather and scatter move data to or from one rank, directly between the root and every other rank (one message each way; the root's link carries the
// whole payload whichever way it is routed, so a tree would only add latency terms).
//
// Like the broadcast tree, no rank returns success unless every rank took part with the same
// root and size: the root, having everything it needs, sends a commit to every rank, and a rank
// returns only with it. The root also sends one empty message (gather's "go") or receives one
// with every rank's size (scatter's "args") before it waits, so a disagreement on the root is
// found at once and not by the deadline: every data fragment carries the root its sender was
// called with (peer_wire.hpp), and with two different roots named some rank receives a message
// naming a root that is not its own, a `mismatch` told to every rank.
#include <cstring>

#include "algo/p2p_algorithms.hpp"

namespace sparcoll::algo {
namespace {

constexpr std::uint32_t kGoTag = 0;
constexpr std::uint32_t kArgsTag = 1;
constexpr std::uint32_t kDataTag = 2;
constexpr std::uint32_t kCommitTag = 3;

// A non-root rank's end: post the root's commit, await everything posted.
Task await_commit(p2p::Peers& peers, std::uint32_t root) {
  peers.recv(root, kCommitTag, nullptr, 0);
  co_return co_await peers.wait();
}

Task send_commits(p2p::Peers& peers, std::uint32_t root) {
  for (std::uint32_t p = 0; p < peers.size(); ++p)
    if (p != root) peers.send(p, kCommitTag, nullptr, 0);
  co_return co_await peers.wait();
}

}  // namespace

Task direct_gather(p2p::Peers& peers, const void* send, void* recv, std::size_t bytes, std::uint32_t root) {
  const std::uint32_t n = peers.size(), r = peers.rank();
  if (r != root) {
    peers.send(root, kDataTag, send, bytes);
    peers.recv(root, kGoTag, nullptr, 0);
    co_return co_await await_commit(peers, root);
  }
  auto* out = static_cast<std::byte*>(recv);
  if (bytes != 0 && out + std::size_t{r} * bytes != send) std::memmove(out + std::size_t{r} * bytes, send, bytes);
  for (std::uint32_t p = 0; p < n; ++p) {
    if (p == root) continue;
    peers.recv(p, kDataTag, out + std::size_t{p} * bytes, bytes);  // another size: a mismatch naming p
    peers.send(p, kGoTag, nullptr, 0);
  }
  if (Status s = co_await peers.wait(); !s.ok()) co_return s;
  co_return co_await send_commits(peers, root);
}

Task direct_scatter(p2p::Peers& peers, const void* send, void* recv, std::size_t bytes, std::uint32_t root,
                    Scratch& scratch) {
  const std::uint32_t n = peers.size(), r = peers.rank();
  const std::uint64_t mine = bytes;
  if (r != root) {
    peers.send(root, kArgsTag, &mine, sizeof mine);
    peers.recv(root, kDataTag, recv, bytes);
    co_return co_await await_commit(peers, root);
  }
  const auto* in = static_cast<const std::byte*>(send);
  scratch.words.assign(n, 0);
  for (std::uint32_t p = 0; p < n; ++p) {
    if (p == root) continue;
    peers.recv(p, kArgsTag, &scratch.words[p], sizeof(std::uint64_t));
    peers.send(p, kDataTag, in + std::size_t{p} * bytes, bytes);
  }
  if (Status s = co_await peers.wait(); !s.ok()) co_return s;
  for (std::uint32_t p = 0; p < n; ++p)
    if (p != root && scratch.words[p] != mine)
      co_return Status(ErrorCode::mismatch, peers.what() + ": rank " + std::to_string(p) + " receives " +
                                                std::to_string(scratch.words[p]) + " bytes, the root sends " +
                                                std::to_string(mine) +
                                                " to each rank (the counts differ across ranks)");
  if (bytes != 0 && static_cast<std::byte*>(recv) != in + std::size_t{r} * bytes)
    std::memmove(recv, in + std::size_t{r} * bytes, bytes);
  co_return co_await send_commits(peers, root);
}

Task direct_all_to_all(p2p::Peers& peers, const std::byte* send, const std::size_t* send_bytes,
                       const std::size_t* send_offsets, std::byte* recv, const std::size_t* recv_bytes,
                       const std::size_t* recv_offsets) {
  const std::uint32_t n = peers.size(), r = peers.rank();
  if (recv_bytes[r] != 0) std::memmove(recv + recv_offsets[r], send + send_offsets[r], recv_bytes[r]);
  // Rank r sends to r+1, r+2, ... first: at each moment the ranks send to different peers.
  for (std::uint32_t k = 1; k < n; ++k) {
    const std::uint32_t to = (r + k) % n, from = (r + n - k) % n;
    peers.recv(from, kDataTag, recv + recv_offsets[from], recv_bytes[from]);  // another size: a mismatch
    peers.send(to, kDataTag, send + send_offsets[to], send_bytes[to]);
  }
  co_return co_await peers.wait();
}

}  // namespace sparcoll::algo
