// Peers::read_peer_memory: the direct algorithm's one-copy reads, with this collective's name on
// any error.
#include "p2p/peers.hpp"

namespace sparcoll::p2p {

Status Peers::read_peer_memory(std::uint32_t peer, std::uint64_t remote, void* local, std::size_t bytes) {
  if (bytes == 0) return Status();
  Status s = channel_->read_peer_memory(peer, remote, local, bytes);
  if (!s.ok()) return Status(s.code(), what_ + ": " + s.message());
  bytes_received_ += bytes;
  return s;
}

}  // namespace sparcoll::p2p
