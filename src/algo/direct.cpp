// Dense allreduce that reads the peers' buffers in place, for transports whose peers' memory
// this process can read (shm: the peers are processes of this host, process_vm_readv): one copy
// per byte moved, as Open MPI's vader does with CMA, where the ring copies every byte into a
// shared ring and out again.
//
//   1. every rank tells every other one where its send and recv buffers are;
//   2. rank r reduces chunk r: piece by piece (cache-sized), it reads the piece of every rank's
//      send buffer, in rank order (its own in place), and combines them into an accumulator,
//      then rounds once into its recv buffer;
//   3. every rank says its chunk is done;
//   4. rank r copies every other chunk straight out of its owner's recv buffer into its own;
//   5. every rank says it has finished reading, and returns once every other one has: until
//      then a peer may still be reading this rank's buffers.
// Every chunk is reduced by one rank in one fixed order and copied to the others: results are
// bitwise identical on every rank and across runs. Three rounds of small messages: for tensors
// where bandwidth, not latency, decides (the selector's size threshold).
#include <cstring>

#include "algo/p2p_algorithms.hpp"
#include "block/reduce.hpp"

namespace sparcoll::algo {
namespace {

constexpr std::uint32_t kAddressTag = 0;
constexpr std::uint32_t kChunkDoneTag = 1;
constexpr std::uint32_t kFinishedTag = 2;
// Elements per piece: the accumulator and the piece read from a peer stay in the cache.
constexpr std::size_t kPieceElems = 32 * 1024;
// Bytes per read when copying a finished chunk.
constexpr std::size_t kCopyBytes = std::size_t{1} << 20;

// Posts one small message to every peer and a receive from every peer, then awaits them.
Task exchange(p2p::Peers& peers, std::uint32_t tag, const void* mine, void* theirs, std::size_t bytes) {
  const std::uint32_t n = peers.size(), r = peers.rank();
  auto* out = static_cast<std::byte*>(theirs);
  for (std::uint32_t p = 0; p < n; ++p) {
    if (p == r) continue;
    peers.send(p, tag, mine, bytes);
    peers.recv(p, tag, out + p * bytes, bytes);
  }
  co_return co_await peers.wait();
}

}  // namespace

Task direct_allreduce(p2p::Peers& peers, const void* send, void* recv, std::size_t count, DataType dtype,
                      ReduceOp op, Scratch& scratch) {
  const std::uint32_t n = peers.size(), r = peers.rank();
  const std::size_t esize = dtype_size(dtype);
  if (scratch.acc.size() < kPieceElems * 4) scratch.acc.resize(kPieceElems * 4);
  if (scratch.tmp.size() < kPieceElems * esize) scratch.tmp.resize(kPieceElems * esize);
  // Per rank: the address of its send buffer, then of its recv buffer.
  std::vector<std::uint64_t>& where = scratch.words;
  where.assign(2 * std::size_t{n}, 0);
  const std::uint64_t mine[2] = {reinterpret_cast<std::uint64_t>(send), reinterpret_cast<std::uint64_t>(recv)};
  if (Status s = co_await exchange(peers, kAddressTag, mine, where.data(), sizeof mine); !s.ok()) co_return s;
  auto send_of = [&](std::uint32_t q) { return where[2 * std::size_t{q}]; };
  auto recv_of = [&](std::uint32_t q) { return where[2 * std::size_t{q} + 1]; };

  // 2. This rank's chunk, reduced out of every rank's send buffer in rank order.
  const std::size_t begin = chunk_begin(count, n, r), end = chunk_begin(count, n, r + 1);
  std::byte* acc = scratch.acc.data();
  std::byte* piece = scratch.tmp.data();
  for (std::size_t pb = begin; pb < end; pb += kPieceElems) {
    const std::size_t len = std::min(kPieceElems, end - pb);
    for (std::uint32_t q = 0; q < n; ++q) {
      const std::byte* src = static_cast<const std::byte*>(send) + pb * esize;
      if (q != r) {
        if (Status s = peers.read_peer_memory(q, send_of(q) + pb * esize, piece, len * esize); !s.ok()) co_return s;
        src = piece;
      }
      if (q == 0)
        block::acc_load(dtype, src, acc, len);
      else
        block::acc_reduce(dtype, op, src, acc, len);
    }
    block::acc_store(dtype, op, acc, len, n, static_cast<std::byte*>(recv) + pb * esize);
  }

  // 3. Chunks done; 4. every other chunk out of its owner's recv buffer.
  std::uint32_t done = 1;
  std::vector<std::uint32_t>& acks = scratch.acks;
  acks.assign(n, 0);  // what the peers say is not looked at: its arrival is the news
  if (Status s = co_await exchange(peers, kChunkDoneTag, &done, acks.data(), sizeof done); !s.ok()) co_return s;
  for (std::uint32_t q = 0; q < n; ++q) {
    if (q == r) continue;
    const std::size_t b = chunk_begin(count, n, q), e = chunk_begin(count, n, q + 1);
    // In pieces: one read of tens of MiB pins all its pages at once and ran slower.
    for (std::size_t at = b * esize; at < e * esize; at += kCopyBytes) {
      const std::size_t len = std::min(kCopyBytes, e * esize - at);
      if (Status s = peers.read_peer_memory(q, recv_of(q) + at, static_cast<std::byte*>(recv) + at, len); !s.ok())
        co_return s;
    }
  }
  // 5. Nobody reads this rank's buffers any more once everybody says so.
  co_return co_await exchange(peers, kFinishedTag, &done, acks.data(), sizeof done);
}

}  // namespace sparcoll::algo
