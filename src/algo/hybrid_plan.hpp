// Which stripes of a hybrid allreduce go the dense way. Every rank computes it from the same
// table (every rank's estimated count of non-zero blocks per stripe, exchanged at the start), so
// every rank reaches the same plan.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "sparcoll/communicator.hpp"
#include "sparcoll/types.hpp"

namespace sparcoll::algo {

// Blocks sampled per stripe to estimate its density (every block of a shorter stripe).
constexpr std::uint32_t kStripeSamples = 32;
// The sample's phase that takes the middle block of each part of the stripe.
constexpr std::uint64_t kMiddlePhase = ~std::uint64_t{0};

// An estimate of the non-zero blocks of the stripe of `data` (count elements of dtype, blocks of
// block_elems) of `blocks` blocks from block `first`, from kStripeSamples blocks spread evenly
// over it: exact for a stripe of at most that many blocks. The i-th sample is a block of the
// i-th of kStripeSamples equal parts of the stripe, `phase` (0 to blocks - 1; by default the
// middle) saying where in its part: a call that samples a stripe again at another phase sees
// other blocks. The plan needs densities, not the bitmap: the stripes it makes dense are never
// read in full (on a 16 MiB tensor at 30% density the full scan cost about as much as the dense
// allreduce after it), and only the sparse ones are scanned, once the plan is known.
std::uint32_t sample_stripe_count(const void* data, std::size_t count, DataType dtype, std::uint32_t block_elems,
                                  std::uint64_t first, std::uint64_t blocks, std::uint64_t phase = kMiddlePhase);
// The exact count of non-zero blocks among `blocks` blocks from block `first`: every block read
// up to its first non-zero element (a zero block in full). The hybrid counts a dense stripe's
// result this way after the call that exchanged the samples (Executor::remember_result).
std::uint32_t count_stripe_blocks(const void* data, std::size_t count, DataType dtype, std::uint32_t block_elems,
                                  std::uint64_t first, std::uint64_t blocks);
// Which of those samples are non-zero: bit i for the i-th sampled block of the stripe. Every rank
// samples the same blocks, so the OR of several ranks' masks samples their union: what block
// recursive doubling sends, which on real gradients is far below what independent supports would
// give (workers share their hot rows).
std::uint32_t sample_stripe_mask(const void* data, std::size_t count, DataType dtype, std::uint32_t block_elems,
                                 std::uint64_t first, std::uint64_t blocks, std::uint64_t phase = kMiddlePhase);
// masks[s] = sample_stripe_mask of stripe s (stripes of stripe_blocks blocks, the last one
// shorter), at the middle phase: what every rank exchanges at the start of a hybrid allreduce.
void sample_stripe_masks(const void* data, std::size_t count, DataType dtype, std::uint32_t block_elems,
                         std::uint32_t stripe_blocks, std::uint32_t* masks);
// The estimated non-zero blocks of a stripe of `blocks` blocks whose samples' mask is `mask`.
std::uint32_t mask_blocks(std::uint32_t mask, std::uint64_t blocks);
// A table of masks (entries of `stripes` stripes each, ranks x stripes) as the estimated counts
// the stripes' plan takes (plan_dense_stripes): counts[i] = mask_blocks(masks[i], the length of
// stripe i % stripes).
void mask_counts(const std::uint32_t* masks, std::size_t entries, std::uint32_t stripes, std::uint64_t nblocks,
                 std::uint32_t stripe_blocks, std::uint32_t* counts);

// counts[r * stripes + s]: rank r's non-zero blocks in stripe s (stripe_blocks blocks, the last
// one shorter when nblocks is not a multiple). A stripe goes dense when its union block density,
// estimated as if the ranks' blocks were independent (1 - prod(1 - d_r)), is at least
// dense_percent / 100: real gradients overlap more than that (workers share their hot rows), so
// the estimate errs toward dense, which is never slower than the dense allreduce. Sets bit s of
// *dense (resized to whole words).
void plan_dense_stripes(const std::uint32_t* counts, std::uint32_t ranks, std::uint32_t stripes, std::uint64_t nblocks,
                        std::uint32_t stripe_blocks, std::uint32_t dense_percent, std::vector<std::uint64_t>* dense);

// SPARCOLL_HYBRID_DENSE_PERCENT=auto over shm: the union density of `ranks` ranks each
// kShmDensePerRankPercent dense with independent supports, in whole percent (rounded). Over shm
// block-sparse and the ring met at about that per-rank density at 2, 4 and 8 ranks (16 MiB: a
// union of 23, 40 and 64%), so a single union threshold was too high at 2 ranks and too low at
// 8. Integers only: the same on every rank.
constexpr std::uint32_t kShmDensePerRankPercent = 12;
std::uint32_t shm_dense_union_percent(std::uint32_t ranks);

// Whether block recursive doubling beats the ring (or, `against_stripes`, the stripes) for the
// whole of a hybrid allreduce's tensor. masks[r * stripes + s]: rank r's
// sample mask of stripe s (sample_stripe_masks). True when the bytes it is estimated to send, in
// blocks, are at most max_percent of the ring's 2(p-1)/p of the tensor: over its log2(p) steps,
// the union of the largest group of 2^k ranks (the OR of their masks), plus one rank's blocks
// for the fold when p is not a power of two. (No lower bound: down to no block at all it was as
// fast as the stripes or faster once it stopped writing the zeros an in-place tensor already
// holds: docs/perf-log.md, "Block recursive doubling writes only the result's blocks".)
// `against_stripes` (a tensor that goes in stripes when block recursive doubling is not picked),
// with a power of two of ranks: and at most what the stripes' block-sparse engine is estimated to
// send, (p-1)/p of a rank's blocks and of the union (a worker's blocks to their aggregators, an
// aggregator's share of the union to the others), both sides from the ranks' means (a step's mean
// union over its groups; the largest of noisy samples is biased up). Its log2(p) steps send ever
// larger unions, so from 8 ranks the engine sends fewer above about 6%: at 8 ranks over tcp, 16
// MiB at 10% (1.08x the engine's bytes, 36% of the ring's), the engine was 1.11-1.14x faster in
// four measurements (docs/perf-log.md, "Block recursive doubling against the engine's bytes"). At 2
// and 4 ranks it sends fewer than the engine wherever max_percent allows it: nothing changes
// there. Not at other rank counts: at 3 and 6 ranks over tcp, where the bytes favour the engine
// at every density, block recursive doubling (its fold and steps) was as fast or faster at 10 of
// 12 points. Where the stripes would go dense the ring is the alternative, whose bytes
// max_percent bounds; the engine's estimate is below the ring's, so there this rule can only be
// the stricter one. Integers only: the same table gives the same answer on every rank.
bool prefer_block_recursive_doubling(const std::uint32_t* masks, std::uint32_t ranks, std::uint32_t stripes,
                                     std::uint64_t nblocks, std::uint32_t stripe_blocks, std::uint32_t max_percent,
                                     bool against_stripes = false);

// Over a wire, a tensor above kWireLargeTensorBytes goes by block recursive doubling only where
// it sends at most kWireLargeTensorPercent of the ring's bytes. Every tensor is planned whole
// (one exchange of sample masks, kept per shape) and goes whole where block recursive doubling
// is picked, else in stripes. At 12-16 MiB, 10-30% and 2 ranks over tcp it took 0.6-0.8x the
// stripes' time, but above that the stripes' engine overtakes it as the density grows (the
// tensor and its block sets no longer fit the host's 32 MiB cache together): at 48-100 MiB, 2
// ranks, it took 1.07-1.14x their time at 10% and 1.18-1.27x at 30%, and 0.85-0.97x at 3%
// (docs/perf-log.md, "Every tensor planned whole"). Over shm max_percent is 10 from 8 MiB on
// already.
constexpr std::uint64_t kWireLargeTensorBytes = std::uint64_t{16} << 20;
constexpr std::uint32_t kWireLargeTensorPercent = 8;

// prefer_block_recursive_doubling's max_percent for a tensor of `bytes`. Measured against the
// ring (2 ranks) and the butterfly (4 and 8) on random blocks from 256 KiB to 1.9 MiB, and
// against the stripes at 2-4 MiB, both in one program (docs/perf-log.md, "Block recursive
// doubling's share of the ring"): over loopback tcp the two met where block recursive doubling sent above
// 80% of the ring's bytes at 256 KiB, 65-78% at 512 KiB, 55-70% at 1 MiB and 50-60% at 1.9 MiB
// (its fewer steps count less as the tensor grows); over shm at 13-30% up to 2 MiB (the extra
// passes over memory of its merges are what its fewer bytes pay for there), and between 10 and
// 19% at 4 MiB. So over a wire 80% up to 256 KiB, 12 points less per doubling of the size
// (linear between powers of two), at least 45 (and kWireLargeTensorPercent above
// kWireLargeTensorBytes); over shm 20% up to 2 MiB, 5 points less per doubling, at least 10.
// Integers only: the same on every rank.
std::uint32_t rd_max_percent(bool over_shm, std::uint64_t bytes);

// The union density (whole percent of the blocks non-zero on some rank) from which
// prefer_block_recursive_doubling picks the dense algorithm (or, `against_stripes`, the
// stripes), for `ranks` ranks as dense as each other with independent supports; 101: never.
// Only multiplications: the same on every rank.
std::uint32_t whole_tensor_dense_union_percent(std::uint32_t ranks, std::uint32_t max_percent,
                                               bool against_stripes = false);

// The plan the result of a call planned as `plan` calls for, for the next call of its shape: the
// result's non-zero blocks per stripe (`counts`, the union of every rank's blocks, the same on
// every rank) against dense_percent, in integers. A block-sparse stripe's count is exact (the
// workers counted the result blocks they received): it goes dense when the count reaches the
// threshold. A dense stripe's count is a sample of the result: it goes block-sparse only below
// the threshold less kFollowHysteresisPercent, so that a stripe near the threshold does not turn
// on the noise of 32 samples every call. A stripe the sample made dense by mistake (the exchanged
// samples are as noisy: at 10% density per rank and 4 ranks, a union of 34% against a threshold
// of 40, 7 stripes of 32 went dense) is sampled again at another phase each call, and a
// block-sparse stripe below the threshold stays so: the plan settles on what the union is.
// `dense_exact`: the dense stripes' counts are exact too (count_stripe_blocks, after the call that
// exchanged the samples), so they meet the threshold itself, as block-sparse stripes do: a
// stripe the exchanged samples made dense by mistake goes block-sparse on the next call, where a
// sample at 10% density and 2 ranks (a union of 19% against 23) kept it dense for a few calls.
constexpr std::uint32_t kFollowHysteresisPercent = 5;
void follow_result(const std::uint32_t* counts, const std::vector<std::uint64_t>& plan, std::uint32_t stripes,
                   std::uint64_t nblocks, std::uint32_t stripe_blocks, std::uint32_t dense_percent,
                   std::vector<std::uint64_t>* next, bool dense_exact = false);

// Whether a dense stripe of `blocks` whose result count is `count` goes block-sparse on the next
// call (follow_result's rule for a dense stripe counted by a sample). A sample of 32 blocks is too
// noisy to act on alone: at 4 ranks and 30% density (a union of 76% against the wire's 65, so
// 60 with the hysteresis) one of 32 stripes crossed on about every other call, and one
// block-sparse stripe among dense ones costs the whole call the engine beside the ring (16 MiB
// over tcp: 36 against 28 ms). So the executor counts such a stripe exactly before it leaves.
bool sample_leaves_dense(std::uint32_t count, std::uint64_t blocks, std::uint32_t dense_percent);

// For a tensor sent whole: what its result calls for, from its sampled counts of non-zero blocks
// per stripe (sample_stripe_count of the result: the union of every rank's blocks, the same bits
// on every rank): block recursive doubling while the whole tensor's union density is below
// high_percent (whole_tensor_dense_union_percent), compared in integers. PlanReuse keeps a
// shape's table while this stays the same from one result to the next.
enum class RdBand : std::uint8_t { inside, above };
// The whole tensor's union density from those counts: whole percent of its nblocks (0 for none).
std::uint32_t result_union_percent(const std::uint32_t* counts, std::uint32_t stripes, std::uint64_t nblocks);
RdBand result_rd_band(const std::uint32_t* counts, std::uint32_t stripes, std::uint64_t nblocks,
                      std::uint32_t high_percent);

// The dense algorithm for a tensor below SPARCOLL_HYBRID_MIN_BYTES: the butterfly (recursive
// halving, then doubling: 2 log2(p) steps) when the ranks are a power of two above 2, else the
// ring (2(p-1) steps; at 2 ranks the two are the same exchanges). Both move 2(p-1)/p of the
// tensor; below a few MiB the steps decide: at 4 ranks the butterfly took 35 against the ring's
// 54 us at 64 KiB over shm, 108 against 233 over tcp, and 0.93 against 1.55 ms at 1 MiB over tcp.
Algorithm dense_algorithm_below_stripes(std::uint32_t ranks);

// Blocks per stripe for a tensor of nblocks: a multiple of 64 (whole bitmap words), at least 512
// blocks, at most 64 stripes.
std::uint32_t stripe_blocks_for(std::uint64_t nblocks);

}  // namespace sparcoll::algo
