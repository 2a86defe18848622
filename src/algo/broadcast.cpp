// Broadcast down a binomial tree rooted at `root`: log2(n) rounds, each rank receives once from
// its parent and then forwards to its children (largest subtree first).
//
// Then every rank acknowledges to its parent, once its own children have, with the root and
// size it was called with, and the root, having every acknowledgement, sends a commit back down
// the tree; a rank returns only with the commit. So no rank returns success unless every rank
// took part with the same root and size: ranks that disagree fail with a mismatch (they used to
// return success with different data), and a skipped call fails the others with a timeout
// naming it. (A root that differs is usually caught before: every fragment carries its
// sender's root, peer_wire.hpp.) Every receive is posted before its message can arrive, so a message nobody posted
// for is a disagreement found at once (Peers::expect_only_posted), not a timeout. The agreement
// costs two more log2(n) trips of small messages.
#include <cstring>

#include "algo/p2p_algorithms.hpp"

namespace sparcoll::algo {
namespace {

constexpr std::uint32_t kDataTag = 0;
constexpr std::uint32_t kAckTag = 1;
constexpr std::uint32_t kCommitTag = 2;
constexpr std::uint32_t kMaxChildren = 32;  // a binomial tree of up to 2^32 ranks

// What a rank acknowledges with: the arguments it was called with.
struct Ack {
  std::uint32_t root;
  std::uint32_t reserved;
  std::uint64_t bytes;
};

}  // namespace

Task tree_broadcast(p2p::Peers& peers, void* buffer, std::size_t bytes, std::uint32_t root) {
  const std::uint32_t n = peers.size();
  const std::uint32_t vr = (peers.rank() + n - root) % n;  // rank relative to the root
  auto real = [n, root](std::uint32_t v) { return (v + root) % n; };
  std::uint32_t mask = 1;
  bool has_parent = false;
  while (mask < n) {
    if (vr & mask) {
      has_parent = true;
      break;
    }
    mask <<= 1;
  }
  const std::uint32_t parent = has_parent ? real(vr - mask) : 0;
  std::uint32_t children[kMaxChildren];
  std::uint32_t nchildren = 0;
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (vr + mask < n) children[nchildren++] = real(vr + mask);

  if (has_parent) peers.recv(parent, kDataTag, buffer, bytes);
  peers.expect_only_posted();
  if (Status s = co_await peers.wait(); !s.ok()) co_return s;
  // Children acknowledge only after our data reached them: their receives go in first.
  Ack acks[kMaxChildren];
  for (std::uint32_t i = 0; i < nchildren; ++i) peers.recv(children[i], kAckTag, &acks[i], sizeof(Ack));
  for (std::uint32_t i = 0; i < nchildren; ++i) peers.send(children[i], kDataTag, buffer, bytes);
  if (Status s = co_await peers.wait(); !s.ok()) co_return s;
  for (std::uint32_t i = 0; i < nchildren; ++i) {
    if (acks[i].root != root || acks[i].bytes != bytes)
      co_return Status(ErrorCode::mismatch, peers.what() + ": rank " + std::to_string(children[i]) + " broadcast " +
                                                std::to_string(acks[i].bytes) + " bytes from root " +
                                                std::to_string(acks[i].root) + ", this rank " + std::to_string(bytes) +
                                                " bytes from root " + std::to_string(root) +
                                                " (the ranks disagree on the root or the count)");
  }
  std::uint32_t commit = 0;
  if (has_parent) {
    peers.recv(parent, kCommitTag, &commit, sizeof commit);
    const Ack mine{root, 0, bytes};
    peers.send(parent, kAckTag, &mine, sizeof mine);
    if (Status s = co_await peers.wait(); !s.ok()) co_return s;
  }
  for (std::uint32_t i = 0; i < nchildren; ++i) peers.send(children[i], kCommitTag, &commit, sizeof commit);
  co_return co_await peers.wait();
}

}  // namespace sparcoll::algo
