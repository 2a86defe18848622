// Counter-based random numbers for stochastic rounding: the draw for element i of bucket b is a
// pure function of (seed, b, i), with no state carried from one element to the next. Encodings
// are therefore reproducible with a fixed seed, identical however the work is split over
// threads, and the per-element hash is plain 32-bit integer arithmetic that vectorizes.
#pragma once

#include <cstdint>

namespace sparcoll::algo::compress {

// SplitMix64's finalizer (Steele, Lea, Flood 2014): a 64-bit bijection with full avalanche,
// used once per bucket to derive its key from the seed and the bucket index.
constexpr std::uint64_t splitmix64(std::uint64_t x) noexcept {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A 32-bit bijection with low bias (C. Wellons' "lowbias32"): the per-element mixer.
constexpr std::uint32_t mix32(std::uint32_t x) noexcept {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

struct BucketKey {
  std::uint32_t lo, hi;
};

constexpr BucketKey bucket_key(std::uint64_t seed, std::uint64_t bucket) noexcept {
  const std::uint64_t k = splitmix64(seed ^ splitmix64(bucket));
  return {static_cast<std::uint32_t>(k), static_cast<std::uint32_t>(k >> 32)};
}

// 32 random bits for element i of the bucket with key `key`. Both rounds are bijections of i, so
// the draws within one bucket never repeat.
constexpr std::uint32_t element_bits(BucketKey key, std::uint32_t i) noexcept { return mix32(mix32(i ^ key.lo) + key.hi); }

// A uniform float in [0, 1) from the top 24 bits (exact in fp32).
constexpr float unit_uniform(std::uint32_t bits) noexcept {
  return static_cast<float>(static_cast<std::int32_t>(bits >> 8)) * 0x1p-24f;
}

}  // namespace sparcoll::algo::compress
