// QSGD encode / decode-add: argument checks, bucket walk, the scalar kernels (the reference) and
// the run-time dispatch to the AVX2 kernels (qsgd_avx2.cpp).
#include "algo/compress/qsgd.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>

#include "algo/compress/counter_rng.hpp"
#include "algo/compress/qsgd_kernels.hpp"

namespace sparcoll::algo::compress {
namespace {

// Values quantized per inner pass: their codes are staged on the stack, then packed.
constexpr std::size_t kChunk = 64;
// Bucket sizes are bounded so in-bucket indices fit the 32-bit counter of the random draw.
constexpr std::size_t kMaxBucket = std::size_t{1} << 31;
constexpr std::uint32_t kAbsMask = 0x7fffffffu;
constexpr std::uint32_t kInfBits = 0x7f800000u;

Status check_params(const char* who, unsigned bits, std::size_t bucket) {
  if (bits != 2 && bits != 4 && bits != 8)
    return Status(ErrorCode::invalid_argument,
                  std::string(who) + ": bits = " + std::to_string(bits) + " is not one of 2, 4, 8");
  if (bucket == 0 || bucket > kMaxBucket)
    return Status(ErrorCode::invalid_argument,
                  std::string(who) + ": bucket = " + std::to_string(bucket) + " is outside [1, 2^31]");
  return Status::Ok();
}

constexpr std::size_t code_bytes(std::size_t m, unsigned bits) noexcept { return (m * bits + 7) / 8; }

std::size_t encoded_size(std::size_t n, unsigned bits, std::size_t bucket) noexcept {
  const std::size_t full = n / bucket, tail = n % bucket;
  return full * (4 + code_bytes(bucket, bits)) + (tail != 0 ? 4 + code_bytes(tail, bits) : 0);
}

// Largest magnitude of a bucket as bits; NaN and Inf have bit patterns >= kInfBits, so the
// maximum also says whether the bucket is finite (non-negative floats order like their bits).
std::uint32_t max_magnitude_bits(const float* v, std::size_t m) noexcept {
  std::uint32_t mx = 0;
  for (std::size_t i = 0; i < m; ++i) mx = std::max(mx, std::bit_cast<std::uint32_t>(v[i]) & kAbsMask);
  return mx;
}

template <unsigned kBits>
constexpr float levels() noexcept {
  return static_cast<float>((1u << (kBits - 1)) - 1);
}

template <unsigned kBits>
EncodeParams encode_params(float scale, BucketKey key) noexcept {
  const float pre = scale < 0x1p-100f ? 0x1p64f : 1.0f;
  return {pre, levels<kBits>() / (scale * pre), key};
}

template <unsigned kBits>
DecodeParams decode_params(float scale) noexcept {
  if (scale < 0x1p-100f) return {scale * 0x1p64f / levels<kBits>(), 0x1p-64f, scale};
  return {scale / levels<kBits>(), 1.0f, scale};
}

// Packs `len` codes (padded with zero codes to a whole byte) into code bytes, lowest bits first.
template <unsigned kBits>
inline void pack_codes(std::uint8_t* codes, std::size_t len, unsigned char* out) noexcept {
  constexpr std::size_t per_byte = 8 / kBits;
  if constexpr (kBits == 8) {
    std::memcpy(out, codes, len);
  } else {
    const std::size_t nbytes = (len + per_byte - 1) / per_byte;
    for (std::size_t j = len; j < nbytes * per_byte; ++j) codes[j] = 0;
    for (std::size_t q = 0; q < nbytes; ++q) {
      unsigned byte = 0;
      for (std::size_t e = 0; e < per_byte; ++e) byte |= static_cast<unsigned>(codes[q * per_byte + e]) << (e * kBits);
      out[q] = static_cast<unsigned char>(byte);
    }
  }
}

template <unsigned kBits>
inline float decode_code(unsigned code, const DecodeParams& p) noexcept {
  constexpr unsigned level_mask = (1u << (kBits - 1)) - 1;
  const unsigned level = code & level_mask;
  const float scaled = static_cast<float>(static_cast<std::int32_t>(level)) * p.unit * p.post;
  const float magnitude = level == level_mask ? p.scale : scaled;
  // The sign bit moved into the float's sign: no branch, no multiply.
  return std::bit_cast<float>(std::bit_cast<std::uint32_t>(magnitude) ^ ((code >> (kBits - 1)) << 31));
}

template <unsigned kBits>
Status encode_all(QsgdEncodeFn kernel, const float* values, std::size_t n, std::size_t bucket, std::uint64_t seed,
                  unsigned char* out) {
  std::size_t b = 0;
  for (std::size_t first = 0; first < n; first += bucket, ++b) {
    const std::size_t m = std::min(bucket, n - first);
    const std::uint32_t mx = max_magnitude_bits(values + first, m);
    if (mx >= kInfBits) {
      const float* bad = std::find_if(values + first, values + first + m, [](float v) { return !std::isfinite(v); });
      return Status(ErrorCode::invalid_argument,
                    "qsgd_encode: value at index " + std::to_string(bad - values) + " (bucket " + std::to_string(b) +
                        ") is " + (std::isnan(*bad) ? "nan" : "inf") + "; quantization needs finite values");
    }
    const float scale = std::bit_cast<float>(mx);
    std::memcpy(out, &scale, 4);  // little-endian on every target this builds for (x86-64)
    if (scale == 0.0f)  // all zeros (or -0.0): every code is level 0
      std::memset(out + 4, 0, code_bytes(m, kBits));
    else
      kernel(values + first, 0, m, encode_params<kBits>(scale, bucket_key(seed, b)), out + 4);
    out += 4 + code_bytes(m, kBits);
  }
  return Status::Ok();
}

template <unsigned kBits>
void decode_all(QsgdDecodeAddFn kernel, const unsigned char* in, std::size_t n, std::size_t bucket,
                float* accum) noexcept {
  for (std::size_t first = 0; first < n; first += bucket) {
    const std::size_t m = std::min(bucket, n - first);
    float scale;
    std::memcpy(&scale, in, 4);
    kernel(in + 4, 0, m, decode_params<kBits>(scale), accum + first);
    in += 4 + code_bytes(m, kBits);
  }
}

}  // namespace

template <unsigned kBits>
void qsgd_encode_scalar(const float* v, std::size_t first, std::size_t m, const EncodeParams& p,
                        unsigned char* codes_out) noexcept {
  constexpr float fs = levels<kBits>();
  alignas(64) std::uint8_t codes[kChunk];
  for (std::size_t c0 = first; c0 < m; c0 += kChunk) {
    const std::size_t len = std::min(kChunk, m - c0);
    for (std::size_t j = 0; j < len; ++j) {
      const float value = v[c0 + j];
      const float x = std::min(std::fabs(value) * p.pre * p.inv, fs);
      const float floor_x = std::floor(x);
      const float up =
          unit_uniform(element_bits(p.key, static_cast<std::uint32_t>(c0 + j))) < x - floor_x ? 1.0f : 0.0f;
      const auto level = static_cast<std::uint32_t>(static_cast<std::int32_t>(floor_x + up));
      const std::uint32_t sign = (std::bit_cast<std::uint32_t>(value) >> 31) & static_cast<std::uint32_t>(level != 0);
      codes[j] = static_cast<std::uint8_t>((sign << (kBits - 1)) | level);
    }
    pack_codes<kBits>(codes, len, codes_out + c0 * kBits / 8);
  }
}

template <unsigned kBits>
void qsgd_decode_add_scalar(const unsigned char* codes, std::size_t first, std::size_t m, const DecodeParams& p,
                            float* acc) noexcept {
  constexpr std::size_t per_byte = 8 / kBits;
  constexpr unsigned code_mask = (1u << kBits) - 1;
  for (std::size_t i = first; i < m; ++i)
    acc[i] += decode_code<kBits>((codes[i / per_byte] >> ((i % per_byte) * kBits)) & code_mask, p);
}

template void qsgd_encode_scalar<2>(const float*, std::size_t, std::size_t, const EncodeParams&, unsigned char*) noexcept;
template void qsgd_encode_scalar<4>(const float*, std::size_t, std::size_t, const EncodeParams&, unsigned char*) noexcept;
template void qsgd_encode_scalar<8>(const float*, std::size_t, std::size_t, const EncodeParams&, unsigned char*) noexcept;
template void qsgd_decode_add_scalar<2>(const unsigned char*, std::size_t, std::size_t, const DecodeParams&, float*) noexcept;
template void qsgd_decode_add_scalar<4>(const unsigned char*, std::size_t, std::size_t, const DecodeParams&, float*) noexcept;
template void qsgd_decode_add_scalar<8>(const unsigned char*, std::size_t, std::size_t, const DecodeParams&, float*) noexcept;

QsgdEncodeFn qsgd_encode_kernel(block::SimdLevel level, unsigned bits) noexcept {
#if defined(__x86_64__)
  if (level >= block::SimdLevel::avx2) {
    if (bits == 2) return qsgd_encode_avx2<2>;
    if (bits == 4) return qsgd_encode_avx2<4>;
    return qsgd_encode_avx2<8>;
  }
#else
  (void)level;
#endif
  if (bits == 2) return qsgd_encode_scalar<2>;
  if (bits == 4) return qsgd_encode_scalar<4>;
  return qsgd_encode_scalar<8>;
}

QsgdDecodeAddFn qsgd_decode_add_kernel(block::SimdLevel level, unsigned bits) noexcept {
#if defined(__x86_64__)
  if (level >= block::SimdLevel::avx2) {
    if (bits == 2) return qsgd_decode_add_avx2<2>;
    if (bits == 4) return qsgd_decode_add_avx2<4>;
    return qsgd_decode_add_avx2<8>;
  }
#else
  (void)level;
#endif
  if (bits == 2) return qsgd_decode_add_scalar<2>;
  if (bits == 4) return qsgd_decode_add_scalar<4>;
  return qsgd_decode_add_scalar<8>;
}

Status qsgd_encoded_bytes(std::size_t n, unsigned bits, std::size_t bucket, std::size_t* bytes) {
  if (Status s = check_params("qsgd_encoded_bytes", bits, bucket); !s.ok()) return s;
  *bytes = encoded_size(n, bits, bucket);
  return Status::Ok();
}

Status qsgd_encode(const float* values, std::size_t n, unsigned bits, std::size_t bucket, std::uint64_t seed,
                   std::byte* out, std::size_t out_bytes) {
  if (Status s = check_params("qsgd_encode", bits, bucket); !s.ok()) return s;
  const std::size_t need = encoded_size(n, bits, bucket);
  if (out_bytes < need)
    return Status(ErrorCode::invalid_argument, "qsgd_encode: output has " + std::to_string(out_bytes) + " bytes, " +
                                                   std::to_string(n) + " values at " + std::to_string(bits) +
                                                   " bits need " + std::to_string(need));
  if (n > 0 && (values == nullptr || out == nullptr))
    return Status(ErrorCode::invalid_argument, "qsgd_encode: null values or output for n = " + std::to_string(n));
  auto* o = reinterpret_cast<unsigned char*>(out);
  const QsgdEncodeFn kernel = qsgd_encode_kernel(block::simd_level(), bits);
  switch (bits) {
    case 2: return encode_all<2>(kernel, values, n, bucket, seed, o);
    case 4: return encode_all<4>(kernel, values, n, bucket, seed, o);
    default: return encode_all<8>(kernel, values, n, bucket, seed, o);
  }
}

Status qsgd_decode_add(const std::byte* encoded, std::size_t encoded_bytes, std::size_t n, unsigned bits,
                       std::size_t bucket, float* accum) {
  if (Status s = check_params("qsgd_decode_add", bits, bucket); !s.ok()) return s;
  const std::size_t need = encoded_size(n, bits, bucket);
  if (encoded_bytes != need)
    return Status(ErrorCode::invalid_argument, "qsgd_decode_add: " + std::to_string(encoded_bytes) +
                                                   " bytes are not an encoding of " + std::to_string(n) +
                                                   " values at " + std::to_string(bits) + " bits in buckets of " +
                                                   std::to_string(bucket) + " (that is " + std::to_string(need) +
                                                   " bytes)");
  if (n > 0 && (encoded == nullptr || accum == nullptr))
    return Status(ErrorCode::invalid_argument, "qsgd_decode_add: null encoding or accumulator for n = " +
                                                   std::to_string(n));
  const auto* in = reinterpret_cast<const unsigned char*>(encoded);
  // Every scale is checked before anything is added, so a bad encoding leaves accum untouched.
  std::size_t b = 0;
  for (std::size_t first = 0, off = 0; first < n; first += bucket, ++b) {
    const std::size_t m = std::min(bucket, n - first);
    float scale;
    std::memcpy(&scale, in + off, 4);
    if (!(scale >= 0.0f && std::isfinite(scale)))
      return Status(ErrorCode::invalid_argument, "qsgd_decode_add: bucket " + std::to_string(b) + " has scale " +
                                                     std::to_string(scale) +
                                                     " (a scale is a finite magnitude: not an encoding)");
    off += 4 + code_bytes(m, bits);
  }
  const QsgdDecodeAddFn kernel = qsgd_decode_add_kernel(block::simd_level(), bits);
  switch (bits) {
    case 2: decode_all<2>(kernel, in, n, bucket, accum); break;
    case 4: decode_all<4>(kernel, in, n, bucket, accum); break;
    default: decode_all<8>(kernel, in, n, bucket, accum); break;
  }
  return Status::Ok();
}

}  // namespace sparcoll::algo::compress
