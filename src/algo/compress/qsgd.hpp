// QSGD stochastic quantization (Alistarh et al., NeurIPS'17) of a float32 array to 2, 4 or 8
// bits per value, as SparCML applies it (buckets of 1024 values by default).
//
// Format. The n values are cut into buckets of `bucket` values (the last may be shorter). Each
// bucket is encoded as
//   * its scale: fp32, the bucket's largest magnitude max|v| (4 bytes, little-endian IEEE), then
//   * ceil(m * bits / 8) bytes of codes for its m values: value i's code sits at bits
//     [i*bits, (i+1)*bits) counted from the least significant bit of the first code byte.
// A code is sign << (bits-1) | level, level in [0, s] with s = 2^(bits-1) - 1 (1, 7 or 127
// levels above zero), sign 1 for negative and always 0 when level is 0 (one encoding of zero).
// It decodes to (sign ? -1 : 1) * level * (scale / s), computed in fp32, except that level s
// decodes to exactly +-scale (the bucket's largest magnitude comes back unchanged).
//
// Why the max-abs scale and not the l2 norm of the paper's analysis: with s as small as 1-127
// and 1024 values per bucket, l2 puts nearly every value below the first level (|v| << ||v||2),
// so almost everything rounds to 0 or ||v||2 and the variance is large; max|v| spreads the levels
// over the range the values occupy, reproduces the largest value exactly, and bounds the
// rounding error of every value by one level step. The variance per value is
// (scale/s)^2 * p(1-p) <= (scale/s)^2 / 4, where p is the value's fractional position between
// its two neighbouring levels, so a bucket's squared error is at most m * scale^2 / (4 s^2).
//
// Rounding. Value v in a bucket with scale S: x = min(|v| * s / S, s), level = floor(x) + 1 with
// probability x - floor(x), else floor(x): unbiased (E[decode] = v, up to fp32 rounding of x and
// the 2^-24 resolution of the draw). The draw for value i of bucket b is a function of
// (seed, b, i) alone (counter_rng.hpp): fixed seed, same bytes, however the encoding is split.
// Values exactly on a level (|v| = l * S/s with S/s a power of two) encode without randomness and
// decode exactly.
#pragma once

#include <cstddef>
#include <cstdint>

#include "sparcoll/status.hpp"

namespace sparcoll::algo::compress {

constexpr std::size_t kQsgdDefaultBucket = 1024;

// The size of the encoding of n values (0 for n = 0).
// Errors (invalid_argument): bits not 2, 4 or 8; bucket 0.
Status qsgd_encoded_bytes(std::size_t n, unsigned bits, std::size_t bucket, std::size_t* bytes);

// Encodes values[0, n) into out (out_bytes >= qsgd_encoded_bytes). Allocates nothing.
// Errors (invalid_argument): bits or bucket as above; out_bytes too small (both sizes named);
// a NaN or Inf value (its index named: a bucket's scale must be finite); null pointers where
// data is needed. On error `out` is unspecified.
Status qsgd_encode(const float* values, std::size_t n, unsigned bits, std::size_t bucket, std::uint64_t seed,
                   std::byte* out, std::size_t out_bytes);

// accum[i] += decode(value i), i < n, in fp32: what a reduction of encoded contributions needs.
// Allocates nothing.
// Errors (invalid_argument): bits or bucket as above; encoded_bytes not the size of an encoding
// of n values with these parameters; a bucket scale that is negative, NaN or Inf (not an
// encoding; the bucket is named). On error `accum` is left unchanged.
Status qsgd_decode_add(const std::byte* encoded, std::size_t encoded_bytes, std::size_t n, unsigned bits,
                       std::size_t bucket, float* accum);

}  // namespace sparcoll::algo::compress
