// Reduction entry points: run-time dispatch of the combining kernels, and the loads and stores
// that are conversions or copies.
#include "block/reduce.hpp"

#include <cstring>

#include "block/convert_kernels.hpp"
#include "block/reduce_kernels.hpp"

namespace sparcoll::block {
namespace {

// avg's divisor; 0 ranks (a caller bug) divides by 1 instead of producing Inf or a trap.
std::uint32_t divisor(std::uint32_t nranks) noexcept { return nranks == 0 ? 1 : nranks; }

// Half-width avg: divide into a stack chunk, then narrow it with the level's converter, so the
// rounding is the same as narrowing an already divided fp32 value.
void store_half_avg(SimdLevel level, DataType dt, const float* acc, std::size_t n, float d,
                    std::uint16_t* out) noexcept {
  constexpr std::size_t kChunk = 256;
  float scaled[kChunk];
  for (std::size_t i = 0; i < n; i += kChunk) {
    const std::size_t len = n - i < kChunk ? n - i : kChunk;
    for (std::size_t j = 0; j < len; ++j) scaled[j] = acc[i + j] / d;
    if (dt == DataType::f16)
      f32_to_f16_at(level, scaled, out + i, len);
    else
      f32_to_bf16_at(level, scaled, out + i, len);
  }
}

}  // namespace

void acc_load_at(SimdLevel level, DataType dt, const void* src, void* acc, std::size_t n) noexcept {
  switch (dt) {
    case DataType::f32:
    case DataType::i32:
      if (n != 0) std::memcpy(acc, src, n * 4);
      return;
    case DataType::f16: return f16_to_f32_at(level, static_cast<const std::uint16_t*>(src), static_cast<float*>(acc), n);
    case DataType::bf16:
      return bf16_to_f32_at(level, static_cast<const std::uint16_t*>(src), static_cast<float*>(acc), n);
    case DataType::f64:
    case DataType::i64:
      if (n != 0) std::memcpy(acc, src, n * 8);
      return;
  }
}

void acc_reduce_at(SimdLevel level, DataType dt, ReduceOp op, const void* src, void* acc, std::size_t n) noexcept {
  if (dtype_is_wide(dt)) return acc_reduce_wide(dt, op, src, acc, n);
  switch (level) {
#if defined(__x86_64__)
    case SimdLevel::avx512: return acc_reduce_avx512(dt, op, src, acc, n);
    case SimdLevel::avx2: return acc_reduce_avx2(dt, op, src, acc, n);
#endif
    default: return acc_reduce_scalar(dt, op, src, acc, n);
  }
}

void acc_reduce_zero_at(SimdLevel level, DataType dt, ReduceOp op, void* acc, std::size_t n) noexcept {
  if (zero_is_neutral(op)) return;  // op(x, 0) == x
  if (dtype_is_wide(dt)) return acc_reduce_zero_wide(dt, op, acc, n);
  switch (level) {
#if defined(__x86_64__)
    case SimdLevel::avx512: return acc_reduce_zero_avx512(dt, op, acc, n);
    case SimdLevel::avx2: return acc_reduce_zero_avx2(dt, op, acc, n);
#endif
    default: return acc_reduce_zero_scalar(dt, op, acc, n);
  }
}

void acc_store_at(SimdLevel level, DataType dt, ReduceOp op, const void* acc, std::size_t n, std::uint32_t nranks,
                  void* out) noexcept {
  const auto* facc = static_cast<const float*>(acc);
  auto* half_out = static_cast<std::uint16_t*>(out);
  if (op != ReduceOp::avg) {
    switch (dt) {
      case DataType::f32:
      case DataType::i32:
        if (n != 0) std::memcpy(out, acc, n * 4);
        return;
      case DataType::f64:
      case DataType::i64:
        if (n != 0) std::memcpy(out, acc, n * 8);
        return;
      case DataType::f16: return f32_to_f16_at(level, facc, half_out, n);
      case DataType::bf16: return f32_to_bf16_at(level, facc, half_out, n);
    }
    return;
  }
  const std::uint32_t d = divisor(nranks);
  switch (dt) {
    case DataType::f32: {
      // A true division (not a multiply by 1/d) so the result is the correctly rounded quotient;
      // the compiler vectorizes the loop.
      auto* fout = static_cast<float*>(out);
      const auto fd = static_cast<float>(d);
      for (std::size_t i = 0; i < n; ++i) fout[i] = facc[i] / fd;
      return;
    }
    case DataType::f16:
    case DataType::bf16: return store_half_avg(level, dt, facc, n, static_cast<float>(d), half_out);
    case DataType::f64: {
      const auto* dacc = static_cast<const double*>(acc);
      auto* dout = static_cast<double*>(out);
      for (std::size_t i = 0; i < n; ++i) dout[i] = dacc[i] / static_cast<double>(d);
      return;
    }
    case DataType::i64: {
      // The API refuses i64 avg (its sum would wrap); truncated toward zero if ever asked.
      const auto* lacc = static_cast<const std::int64_t*>(acc);
      auto* lout = static_cast<std::int64_t*>(out);
      for (std::size_t i = 0; i < n; ++i) lout[i] = lacc[i] / static_cast<std::int64_t>(d);
      return;
    }
    case DataType::i32: {
      // 64-bit so a divisor above INT32_MAX stays positive; C++ division truncates toward zero.
      const auto* iacc = static_cast<const std::int32_t*>(acc);
      auto* iout = static_cast<std::int32_t*>(out);
      for (std::size_t i = 0; i < n; ++i)
        iout[i] = static_cast<std::int32_t>(static_cast<std::int64_t>(iacc[i]) / static_cast<std::int64_t>(d));
      return;
    }
  }
}

void acc_load(DataType dt, const void* src, void* acc, std::size_t n) noexcept {
  acc_load_at(simd_level(), dt, src, acc, n);
}
void acc_reduce(DataType dt, ReduceOp op, const void* src, void* acc, std::size_t n) noexcept {
  acc_reduce_at(simd_level(), dt, op, src, acc, n);
}
void acc_reduce_zero(DataType dt, ReduceOp op, void* acc, std::size_t n) noexcept {
  acc_reduce_zero_at(simd_level(), dt, op, acc, n);
}
void acc_zero(DataType dt, void* acc, std::size_t n) noexcept {
  // All-zero bits are 0 for int32 and +0.0 for fp32, the two accumulator types.
  if (n != 0) std::memset(acc, 0, n * acc_size(dt));
}
void acc_store(DataType dt, ReduceOp op, const void* acc, std::size_t n, std::uint32_t nranks, void* out) noexcept {
  acc_store_at(simd_level(), dt, op, acc, n, nranks, out);
}

void i32_avg_load(const std::int32_t* src, std::int64_t* acc, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) acc[i] = src[i];
}

void i32_avg_add(const std::int32_t* src, std::int64_t* acc, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) acc[i] += src[i];
}

void i32_avg_store(const std::int64_t* acc, std::size_t n, std::uint32_t nranks, std::int32_t* out) noexcept {
  const auto d = static_cast<std::int64_t>(divisor(nranks));
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::int32_t>(acc[i] / d);
}

void i32_split_halves(const std::int32_t* in, std::size_t n, std::int32_t* hi, std::int32_t* lo) noexcept {
  // value = hi * 65536 + lo with lo in [0, 65536): the sums of hi and of lo fit int32 for fewer
  // than 32768 ranks, and zeros stay zeros (sparsity survives).
  for (std::size_t i = 0; i < n; ++i) {
    hi[i] = in[i] >> 16;  // arithmetic shift: floor division by 65536 (C++20)
    lo[i] = in[i] & 0xffff;
  }
}

void i32_avg_from_halves(const std::int32_t* hi_sum, const std::int32_t* lo_sum, std::size_t n, std::uint32_t nranks,
                         std::int32_t* out) noexcept {
  const auto d = static_cast<std::int64_t>(divisor(nranks));
  for (std::size_t i = 0; i < n; ++i)
    out[i] = static_cast<std::int32_t>((std::int64_t{hi_sum[i]} * 65536 + std::int64_t{lo_sum[i]}) / d);
}

}  // namespace sparcoll::block
