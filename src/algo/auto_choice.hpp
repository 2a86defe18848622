// What `auto` runs for an allreduce of a 32-bit dtype, from what every rank already has: the
// rank count, the transport (every process joined with the same), the tensor's bytes and
// SPARCOLL_SMALL_TENSOR_BYTES. No message and no pass over the data; the same answer on every
// rank (docs/algorithms.md, "auto").
#pragma once

#include <cstddef>
#include <cstdint>

#include "sparcoll/communicator.hpp"

namespace sparcoll::algo {

// - one rank: block_sparse (a copy);
// - a small tensor: block_recursive_doubling (log2(p) exchanges of the non-zero blocks seen so
//   far: latency outweighs bytes, and lanes, windows and a density decision cost more than they
//   save), up to small_tensor_bytes halved per doubling of the ranks above 2, once more over
//   shm, and at least once (small_tensor_limit); above that limit, the rest of the small range:
//   over shm the dense algorithm below stripes (dense_algorithm_below_stripes: the butterfly at 4
//   and 8 ranks, else the ring); over a wire the hybrid, which sends such a tensor whole by block
//   recursive doubling or by that dense algorithm, from the ranks' sample masks (at 64 KiB over
//   tcp, in one program: 9-10 us against the ring's 15 at 2 ranks and 44-65 against the
//   butterfly's 71-122 at 4, at 0-50% density; 1.03-1.06x theirs on dense data. Over shm its
//   plan cost 1.2-1.9x the dense algorithm's few microseconds; docs/perf-log.md, "The rest of the
//   small range over a wire");
// - anything larger: hybrid, which decides from the ranks' densities.
Algorithm auto_algorithm(std::uint32_t ranks, bool over_shm, std::size_t bytes, std::uint32_t small_tensor_bytes);

// The largest tensor, in bytes, that `auto` sends by block recursive doubling. Halved per
// doubling of the ranks above 2: its bytes grow with log2(p) while the ring's stay under twice
// the tensor (4 ranks over shm: the ring overtook it between 16 and 64 KiB). Once more over
// shm, where no wire's latency hides its packing and merging passes: on dense data it took
// twice the butterfly's time there at the top of the range (2 ranks, 64 KiB: 25.6 against 11.8
// us; 4 ranks, 32 KiB: 61 against 32); over tcp it was as fast or faster at 4 ranks at every
// density. At least once: at 2 ranks over tcp a dense 64 KiB tensor is one message of more than
// 64 KiB, which loopback's 64 KiB segments deliver in two wake-ups of the receiver (22 us
// against the ring's 16, whose messages are half the tensor; 13 against 16 at 62.5 KiB).
std::size_t small_tensor_limit(std::uint32_t ranks, bool over_shm, std::uint32_t small_tensor_bytes);

}  // namespace sparcoll::algo
