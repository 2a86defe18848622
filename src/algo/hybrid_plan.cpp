#include "algo/hybrid_plan.hpp"

#include <algorithm>
#include <bit>

#include "block/bitmap.hpp"

namespace sparcoll::algo {
namespace {

// Bytes of each sampled block prefetched before the blocks are read (the rest of a larger block
// streams in behind the first lines).
constexpr std::size_t kPrefetchBytes = 1024;

std::uint64_t stripe_samples(std::uint64_t blocks) { return std::min<std::uint64_t>(blocks, kStripeSamples); }

}  // namespace

std::uint32_t mask_blocks(std::uint32_t mask, std::uint64_t blocks) {
  const std::uint64_t samples = stripe_samples(blocks);
  if (samples == 0) return 0;
  return static_cast<std::uint32_t>((std::uint64_t(std::popcount(mask)) * blocks + samples / 2) / samples);
}

void mask_counts(const std::uint32_t* masks, std::size_t entries, std::uint32_t stripes, std::uint64_t nblocks,
                 std::uint32_t stripe_blocks, std::uint32_t* counts) {
  for (std::size_t i = 0; i < entries; ++i) {
    const std::uint64_t first = std::uint64_t{i % stripes} * stripe_blocks;
    counts[i] = mask_blocks(masks[i], std::min<std::uint64_t>(stripe_blocks, nblocks - first));
  }
}

std::uint32_t sample_stripe_mask(const void* data, std::size_t count, DataType dtype, std::uint32_t block_elems,
                                 std::uint64_t first, std::uint64_t blocks, std::uint64_t phase) {
  const std::size_t esize = dtype_size(dtype);
  const auto* bytes = static_cast<const std::byte*>(data);
  const std::uint64_t samples = stripe_samples(blocks);
  if (samples == 0) return 0;
  if (phase == kMiddlePhase) phase = blocks / 2;
  phase %= blocks;
  // A block of the i-th of `samples` equal parts (the middle one by default): every block when
  // samples == blocks.
  const auto sampled = [&](std::uint64_t i) { return first + (blocks * i + phase) / samples; };
  // The sampled blocks lie pages apart, so each read would wait for its own cache and TLB
  // misses in turn (85 us for 1024 blocks of a 16 MiB tensor, 10% of a 2-rank allreduce at
  // 0.1% density): ask for all of the stripe's blocks first, so that their misses overlap.
  for (std::uint64_t i = 0; i < samples; ++i) {
    const std::size_t begin = sampled(i) * block_elems;
    const std::size_t n = std::min<std::size_t>(block_elems, count - begin) * esize;
    for (std::size_t off = 0; off < std::min<std::size_t>(n, kPrefetchBytes); off += 64)
      __builtin_prefetch(bytes + begin * esize + off, 0, 2);
  }
  std::uint32_t mask = 0;
  for (std::uint64_t i = 0; i < samples; ++i) {
    const std::size_t begin = sampled(i) * block_elems, n = std::min<std::size_t>(block_elems, count - begin);
    if (!block::is_zero(bytes + begin * esize, n, dtype)) mask |= std::uint32_t{1} << i;
  }
  return mask;
}

std::uint32_t sample_stripe_count(const void* data, std::size_t count, DataType dtype, std::uint32_t block_elems,
                                  std::uint64_t first, std::uint64_t blocks, std::uint64_t phase) {
  return mask_blocks(sample_stripe_mask(data, count, dtype, block_elems, first, blocks, phase), blocks);
}

std::uint32_t count_stripe_blocks(const void* data, std::size_t count, DataType dtype, std::uint32_t block_elems,
                                  std::uint64_t first, std::uint64_t blocks) {
  const std::size_t esize = dtype_size(dtype);
  const auto* bytes = static_cast<const std::byte*>(data);
  std::uint32_t nonzero = 0;
  for (std::uint64_t b = first; b < first + blocks; ++b) {
    const std::size_t begin = b * block_elems, n = std::min<std::size_t>(block_elems, count - begin);
    nonzero += block::is_zero(bytes + begin * esize, n, dtype) ? 0 : 1;
  }
  return nonzero;
}

void sample_stripe_masks(const void* data, std::size_t count, DataType dtype, std::uint32_t block_elems,
                         std::uint32_t stripe_blocks, std::uint32_t* masks) {
  const std::uint64_t nblocks = block::block_count(count, block_elems);
  for (std::uint64_t first = 0, s = 0; first < nblocks; first += stripe_blocks, ++s)
    masks[s] = sample_stripe_mask(data, count, dtype, block_elems, first,
                                  std::min<std::uint64_t>(stripe_blocks, nblocks - first));
}

namespace {

// Block recursive doubling's estimated bytes in tensors, for ranks whose densest has `densest` of
// its blocks non-zero: the sum over its log2(p) steps of the density of the union of 2^k ranks
// (independent supports).
double rd_share(double densest, std::uint32_t ranks) {
  double rd = 0, all_zero = 1 - densest;  // all_zero: the chance a block is zero on 2^k ranks
  for (std::uint32_t group = 1; group < ranks; group *= 2) {
    rd += 1 - all_zero;
    all_zero *= all_zero;
  }
  return rd;
}

// The same in percent of the ring's bytes, in whole percent, rounded down, as the stripes' rule:
// the same on every rank. The 1e-9 keeps a ratio that is whole on paper (10%) from rounding down
// to the one below (1 - 0.9 = 0.0999..).
std::uint32_t rd_percent_of_ring(double densest, std::uint32_t ranks) {
  const double ring = 2.0 * (ranks - 1) / ranks;
  return static_cast<std::uint32_t>(rd_share(densest, ranks) / ring * 100.0 + 1e-9);
}

// The density of the union of `ranks` ranks each `density` dense with independent supports:
// 1 - (1 - density)^ranks, the power by multiplication (the same bits everywhere).
double union_density(double density, std::uint32_t ranks) {
  double all_zero = 1.0;
  for (std::uint32_t r = 0; r < ranks; ++r) all_zero *= 1.0 - density;
  return 1.0 - all_zero;
}

// Whether block recursive doubling is estimated to send more than the stripes' block-sparse
// engine, (p-1)/p of (one rank's density + the union's), for ranks `densest` dense each.
bool rd_above_engine(double densest, std::uint32_t ranks) {
  const double engine = (ranks - 1.0) / ranks * (densest + union_density(densest, ranks));
  return rd_share(densest, ranks) > engine + 1e-9;
}

}  // namespace

bool prefer_block_recursive_doubling(const std::uint32_t* masks, std::uint32_t ranks, std::uint32_t stripes,
                                     std::uint64_t nblocks, std::uint32_t stripe_blocks, std::uint32_t max_percent,
                                     bool against_stripes) {
  if (ranks < 2 || nblocks == 0) return true;
  // The estimated blocks of the union of ranks [first, first + group): per stripe, the sampled
  // blocks non-zero on any of them, scaled to the stripe's length. Integers only: the same
  // answer on every rank.
  const auto union_blocks = [&](std::uint32_t first, std::uint32_t group) {
    std::uint64_t blocks = 0;
    for (std::uint32_t s = 0; s < stripes; ++s) {
      std::uint32_t any = 0;
      for (std::uint32_t r = first; r < first + group; ++r) any |= masks[std::size_t{r} * stripes + s];
      blocks += mask_blocks(any, std::min<std::uint64_t>(stripe_blocks, nblocks - std::uint64_t{s} * stripe_blocks));
    }
    return blocks;
  };
  // A rank count that is not a power of two first folds the extra ranks in (as
  // block_recursive_doubling.cpp): ranks 2v and 2v+1 become virtual rank v for v < rem, rank
  // v + rem virtual rank v above; one more message, of one rank's blocks. Step k then sends the
  // union of 2^k virtual ranks merged so far: the largest such group's (the step ends when the
  // slowest pair has). Virtual ranks [a, b) are the real ranks [real(a), real(b)).
  const std::uint32_t power = std::bit_floor(ranks), rem = ranks - power;
  const auto real = [&](std::uint32_t v) { return v < rem ? 2 * v : v + rem; };
  std::uint64_t rd = 0;
  if (rem > 0) {
    std::uint64_t densest = 0;
    for (std::uint32_t v = 0; v < rem; ++v) densest = std::max(densest, union_blocks(2 * v, 1));
    rd += densest;
  }
  for (std::uint32_t group = 1; group < power; group *= 2) {
    std::uint64_t largest = 0;
    for (std::uint32_t v = 0; v < power; v += group)
      largest = std::max(largest, union_blocks(real(v), real(v + group) - real(v)));
    rd += largest;
  }
  // rd <= max_percent% of the ring's 2(p-1)/p of the tensor.
  const std::uint64_t ring = std::uint64_t{2} * (ranks - 1) * nblocks;
  if (rd * 100 * ranks > std::uint64_t{max_percent} * ring) return false;
  if (!against_stripes || !std::has_single_bit(ranks)) return true;
  // And its mean step bytes summed at most the engine's (p-1)/p (a rank's mean blocks + the
  // union's). Means, not the largest group's as above: the largest of noisy samples is biased up,
  // the more the more groups, so block recursive doubling's three maxima at 8 ranks against the
  // engine's one lost it the 1% point, where it sends 0.91x the engine's bytes. Step k has p/2^k
  // groups, so p x its mean is 2^k x the sum of its groups' unions; times p on both sides:
  // p sum_k 2^k sum_v U(k, v) <= (p-1) (sum_r own(r) + p U(all)).
  std::uint64_t rd_weighted = 0, own = 0;  // own: the first step's sum, every rank's own blocks
  for (std::uint32_t group = 1; group < ranks; group *= 2) {
    std::uint64_t step = 0;
    for (std::uint32_t v = 0; v < ranks; v += group) step += union_blocks(v, group);
    rd_weighted += step * group;
    if (group == 1) own = step;
  }
  return rd_weighted * ranks <= std::uint64_t{ranks - 1} * (own + std::uint64_t{ranks} * union_blocks(0, ranks));
}

namespace {

// at_base percent up to `base` bytes, per_doubling points less per doubling of the size above it
// (linear between powers of two), at least `least`.
std::uint32_t shrinking_percent(std::uint64_t bytes, std::uint64_t base, std::uint32_t at_base,
                                std::uint32_t per_doubling, std::uint32_t least) {
  if (bytes <= base) return at_base;
  const std::uint64_t doublings = static_cast<std::uint64_t>(std::bit_width(bytes / base)) - 1;
  if (doublings * per_doubling >= at_base - least) return least;  // (and no overflow below)
  const std::uint64_t low = base << doublings;  // the power of two times base at or below bytes
  const std::uint64_t less = doublings * per_doubling + (bytes - low) * per_doubling / low;
  return static_cast<std::uint32_t>(std::max<std::uint64_t>(least, at_base - less));
}

}  // namespace

std::uint32_t rd_max_percent(bool over_shm, std::uint64_t bytes) {
  constexpr std::uint64_t KiB = 1024;
  if (!over_shm && bytes > kWireLargeTensorBytes) return kWireLargeTensorPercent;
  return over_shm ? shrinking_percent(bytes, 2048 * KiB, 20, 5, 10) : shrinking_percent(bytes, 256 * KiB, 80, 12, 45);
}

namespace {

// union_density for ranks `d` percent dense each, in whole percent (rounded down).
std::uint32_t union_percent(std::uint32_t d, std::uint32_t ranks) {
  return static_cast<std::uint32_t>(union_density(d / 100.0, ranks) * 100.0);
}

}  // namespace

std::uint32_t whole_tensor_dense_union_percent(std::uint32_t ranks, std::uint32_t max_percent, bool against_stripes) {
  if (ranks < 2) return 101;
  for (std::uint32_t d = 0; d <= 100; ++d)
    if (rd_percent_of_ring(d / 100.0, ranks) > max_percent ||
        (against_stripes && std::has_single_bit(ranks) && rd_above_engine(d / 100.0, ranks)))
      return union_percent(d, ranks);
  return 101;
}

std::uint32_t shm_dense_union_percent(std::uint32_t ranks) {
  constexpr std::uint64_t kOne = 1'000'000;
  std::uint64_t all_zero = kOne;  // (1 - d)^ranks, in millionths
  for (std::uint32_t r = 0; r < ranks; ++r) all_zero = all_zero * (100 - kShmDensePerRankPercent) / 100;
  return static_cast<std::uint32_t>((kOne - all_zero + kOne / 200) / (kOne / 100));
}

std::uint32_t result_union_percent(const std::uint32_t* counts, std::uint32_t stripes, std::uint64_t nblocks) {
  if (nblocks == 0) return 0;
  std::uint64_t nonzero = 0;
  for (std::uint32_t s = 0; s < stripes; ++s) nonzero += counts[s];
  return static_cast<std::uint32_t>(std::min<std::uint64_t>(nonzero, nblocks) * 100 / nblocks);
}

RdBand result_rd_band(const std::uint32_t* counts, std::uint32_t stripes, std::uint64_t nblocks,
                      std::uint32_t high_percent) {
  if (nblocks == 0) return RdBand::inside;
  return result_union_percent(counts, stripes, nblocks) >= high_percent ? RdBand::above : RdBand::inside;
}

void follow_result(const std::uint32_t* counts, const std::vector<std::uint64_t>& plan, std::uint32_t stripes,
                   std::uint64_t nblocks, std::uint32_t stripe_blocks, std::uint32_t dense_percent,
                   std::vector<std::uint64_t>* next, bool dense_exact) {
  next->assign((stripes + 63) / 64, 0);
  for (std::uint32_t s = 0; s < stripes; ++s) {
    const std::uint64_t first = std::uint64_t{s} * stripe_blocks;
    if (first >= nblocks) break;
    const std::uint64_t blocks = std::min<std::uint64_t>(stripe_blocks, nblocks - first);
    const bool was_dense = s / 64 < plan.size() && ((plan[s / 64] >> (s % 64)) & 1);
    const bool dense = was_dense && !dense_exact
                           ? !sample_leaves_dense(counts[s], blocks, dense_percent)
                           : std::min<std::uint64_t>(counts[s], blocks) * 100 >= std::uint64_t{dense_percent} * blocks;
    if (dense) (*next)[s / 64] |= std::uint64_t{1} << (s % 64);
  }
}

bool sample_leaves_dense(std::uint32_t count, std::uint64_t blocks, std::uint32_t dense_percent) {
  const std::uint32_t threshold = dense_percent - std::min(dense_percent, kFollowHysteresisPercent);
  return std::min<std::uint64_t>(count, blocks) * 100 < std::uint64_t{threshold} * blocks;
}

Algorithm dense_algorithm_below_stripes(std::uint32_t ranks) {
  return ranks > 2 && (ranks & (ranks - 1)) == 0 ? Algorithm::butterfly : Algorithm::ring;
}

std::uint32_t stripe_blocks_for(std::uint64_t nblocks) {
  constexpr std::uint64_t kMinBlocks = 512, kMaxStripes = 64;
  std::uint64_t per = (nblocks + kMaxStripes - 1) / kMaxStripes;
  per = (per + 63) / 64 * 64;
  return static_cast<std::uint32_t>(std::max(per, kMinBlocks));
}

void plan_dense_stripes(const std::uint32_t* counts, std::uint32_t ranks, std::uint32_t stripes, std::uint64_t nblocks,
                        std::uint32_t stripe_blocks, std::uint32_t dense_percent, std::vector<std::uint64_t>* dense) {
  dense->assign((stripes + 63) / 64, 0);
  for (std::uint32_t s = 0; s < stripes; ++s) {
    const std::uint64_t first = std::uint64_t{s} * stripe_blocks;
    const double blocks = static_cast<double>(std::min<std::uint64_t>(stripe_blocks, nblocks - first));
    double all_zero = 1.0;  // the chance a block is zero on every rank
    for (std::uint32_t r = 0; r < ranks; ++r)
      all_zero *= 1.0 - std::min(1.0, counts[std::size_t{r} * stripes + s] / blocks);
    // In percent, compared as integers after rounding down: the same on every rank whatever the
    // last bit of a double (the table is the same bits everywhere, and so is this arithmetic).
    const auto union_percent = static_cast<std::uint32_t>((1.0 - all_zero) * 100.0);
    if (union_percent >= dense_percent) (*dense)[s / 64] |= std::uint64_t{1} << (s % 64);
  }
}

}  // namespace sparcoll::algo
