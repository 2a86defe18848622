// Broadcast down a binomial tree rooted at `root`: log2(n) rounds, each rank receives once from
// its parent and then forwards to its children (largest subtree first). Then every rank
// acknowledges to its parent, once its own children have, with the root and size it was called
// with: the root returns only when every rank took part, and ranks that disagree on the root or
// the size fail with a mismatch instead of returning different data as a success. Every receive
// is posted before its message can arrive, so a message nobody posted for is a disagreement
// found at once (Peers::expect_only_posted), not a timeout. The acknowledgements cost log2(n)
// small-message latencies.
#include <cstring>

#include "algo/p2p_algorithms.hpp"

namespace sparcoll::algo {
namespace {

constexpr std::uint32_t kDataTag = 0;
constexpr std::uint32_t kAckTag = 1;
constexpr std::uint32_t kMaxChildren = 32;  // a binomial tree of up to 2^32 ranks

// What a rank acknowledges with: the arguments it was called with.
struct Ack {
  std::uint32_t root;
  std::uint32_t reserved;
  std::uint64_t bytes;
};

}  // namespace

Status tree_broadcast(coll::Peers& peers, void* buffer, std::size_t bytes, std::uint32_t root) {
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
  if (Status s = peers.wait(); !s.ok()) return s;
  // Children acknowledge only after our data reached them: their receives go in first.
  Ack acks[kMaxChildren];
  for (std::uint32_t i = 0; i < nchildren; ++i) peers.recv(children[i], kAckTag, &acks[i], sizeof(Ack));
  for (std::uint32_t i = 0; i < nchildren; ++i) peers.send(children[i], kDataTag, buffer, bytes);
  if (Status s = peers.wait(); !s.ok()) return s;
  for (std::uint32_t i = 0; i < nchildren; ++i) {
    if (acks[i].root != root || acks[i].bytes != bytes)
      return Status(ErrorCode::mismatch, peers.what() + ": rank " + std::to_string(children[i]) + " broadcast " +
                                             std::to_string(acks[i].bytes) + " bytes from root " +
                                             std::to_string(acks[i].root) + ", this rank " + std::to_string(bytes) +
                                             " bytes from root " + std::to_string(root) +
                                             " (the ranks disagree on the root or the count)");
  }
  if (!has_parent) return Status();
  const Ack mine{root, 0, bytes};
  peers.send(parent, kAckTag, &mine, sizeof mine);
  return peers.wait();
}

}  // namespace sparcoll::algo
