// Broadcast down a binomial tree rooted at `root`: log2(n) rounds, each rank receives once from
// its parent and then forwards to its children (largest subtree first).
#include "algo/p2p_algorithms.hpp"

namespace sparcoll::algo {

Status tree_broadcast(coll::Peers& peers, void* buffer, std::size_t bytes, std::uint32_t root) {
  const std::uint32_t n = peers.size();
  const std::uint32_t vr = (peers.rank() + n - root) % n;  // rank relative to the root
  auto real = [n, root](std::uint32_t v) { return (v + root) % n; };
  std::uint32_t mask = 1;
  while (mask < n) {
    if (vr & mask) {
      peers.recv(real(vr - mask), 0, buffer, bytes);
      if (Status s = peers.wait(); !s.ok()) return s;
      break;
    }
    mask <<= 1;
  }
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (vr + mask < n) peers.send(real(vr + mask), 0, buffer, bytes);
  return peers.wait();
}

}  // namespace sparcoll::algo
