#include "block/reduce.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "block/convert.hpp"
#include "block/reduce_kernels.hpp"
#include "simd_levels.hpp"

namespace sparcoll::block {
namespace {

using test::runnable_levels;

constexpr DataType kDtypes[] = {DataType::f32, DataType::f16, DataType::bf16, DataType::i32};
constexpr ReduceOp kOps[] = {ReduceOp::sum,     ReduceOp::avg,  ReduceOp::min, ReduceOp::max,
                             ReduceOp::product, ReduceOp::band, ReduceOp::bor, ReduceOp::bxor};
const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

// ---- reference semantics, element by element ----

float widen(DataType dt, const std::vector<std::uint32_t>& v, std::size_t i) {
  switch (dt) {
    case DataType::f32: return std::bit_cast<float>(v[i]);
    case DataType::f16: return f16_to_f32(static_cast<std::uint16_t>(v[i]));
    case DataType::bf16: return bf16_to_f32(static_cast<std::uint16_t>(v[i]));
    case DataType::i32: break;
  }
  return 0;
}

float ref_combine(ReduceOp op, float acc, float x) {
  if (op == ReduceOp::sum || op == ReduceOp::avg) return acc + x;
  if (op == ReduceOp::product) return acc * x;
  if (std::isnan(acc)) return acc;
  if (std::isnan(x)) return x;
  if (op == ReduceOp::min) return x <= acc ? x : acc;  // ties take the contribution
  return x >= acc ? x : acc;
}

std::int32_t ref_combine_int(ReduceOp op, std::int32_t acc, std::int32_t x) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return static_cast<std::int32_t>(static_cast<std::int64_t>(acc) + x);  // C++20: modular
    case ReduceOp::min: return std::min(acc, x);
    case ReduceOp::max: return std::max(acc, x);
    case ReduceOp::product:
      return static_cast<std::int32_t>(static_cast<std::uint32_t>(acc) * static_cast<std::uint32_t>(x));  // wraps
    case ReduceOp::band: return acc & x;
    case ReduceOp::bor: return acc | x;
    case ReduceOp::bxor: return acc ^ x;
  }
  return 0;
}

// ---- test data: element bit patterns in uint32 (16-bit types use the low half) ----

std::uint32_t random_element(DataType dt, std::mt19937& rng) {
  const unsigned pick = rng() % 100;
  if (dt == DataType::i32) {
    if (pick < 5) return 0x7fffffffu;  // wraparound material
    if (pick < 10) return 0x80000000u;
    return rng();
  }
  std::uniform_real_distribution<float> value(-1000.0f, 1000.0f);
  float f = value(rng);
  if (pick < 2) f = kNaN;
  else if (pick < 4) f = pick == 2 ? kInf : -kInf;
  else if (pick < 8) f = pick < 6 ? 0.0f : -0.0f;
  else if (pick < 10) f = 1e-40f;  // fp32 subnormal
  switch (dt) {
    case DataType::f32: return std::bit_cast<std::uint32_t>(f);
    case DataType::f16: return f32_to_f16(f);
    case DataType::bf16: return f32_to_bf16(f);
    case DataType::i32: break;
  }
  return 0;
}

// Packs element patterns into the dtype's in-memory layout.
std::vector<unsigned char> pack(DataType dt, const std::vector<std::uint32_t>& v) {
  std::vector<unsigned char> bytes(v.size() * dtype_size(dt) + 1);  // +1: never empty
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (dtype_size(dt) == 4) {
      std::memcpy(bytes.data() + i * 4, &v[i], 4);
    } else {
      const auto h = static_cast<std::uint16_t>(v[i]);
      std::memcpy(bytes.data() + i * 2, &h, 2);
    }
  }
  return bytes;
}

std::uint32_t unpack(DataType dt, const std::vector<unsigned char>& bytes, std::size_t i) {
  if (dtype_size(dt) == 4) {
    std::uint32_t v;
    std::memcpy(&v, bytes.data() + i * 4, 4);
    return v;
  }
  std::uint16_t h;
  std::memcpy(&h, bytes.data() + i * 2, 2);
  return h;
}

bool is_nan_pattern(DataType dt, std::uint32_t p) {
  switch (dt) {
    case DataType::f32: return (p & 0x7fffffffu) > 0x7f800000u;
    case DataType::f16: return (p & 0x7fffu) > 0x7c00u;
    case DataType::bf16: return (p & 0x7fffu) > 0x7f80u;
    case DataType::i32: break;
  }
  return false;
}

// Three contributors and one whose block is zero, reduced as an aggregator would:
// load(c0), reduce(c1), reduce_zero, reduce(c2), store with nranks = 4.
std::vector<std::uint32_t> reference_result(DataType dt, ReduceOp op, const std::vector<std::uint32_t> (&c)[3],
                                            std::size_t n) {
  std::vector<std::uint32_t> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (dt == DataType::i32) {
      std::int32_t acc = static_cast<std::int32_t>(c[0][i]);
      acc = ref_combine_int(op, acc, static_cast<std::int32_t>(c[1][i]));
      acc = ref_combine_int(op, acc, 0);
      acc = ref_combine_int(op, acc, static_cast<std::int32_t>(c[2][i]));
      if (op == ReduceOp::avg) acc /= 4;  // truncation toward zero
      out[i] = static_cast<std::uint32_t>(acc);
      continue;
    }
    float acc = widen(dt, c[0], i);
    acc = ref_combine(op, acc, widen(dt, c[1], i));
    if (op != ReduceOp::sum && op != ReduceOp::avg) acc = ref_combine(op, acc, 0.0f);
    acc = ref_combine(op, acc, widen(dt, c[2], i));
    if (op == ReduceOp::avg) acc /= 4.0f;
    out[i] = dt == DataType::f32   ? std::bit_cast<std::uint32_t>(acc)
             : dt == DataType::f16 ? f32_to_f16(acc)
                                   : f32_to_bf16(acc);
  }
  return out;
}

std::vector<std::uint32_t> run_kernels(SimdLevel level, DataType dt, ReduceOp op,
                                       const std::vector<std::uint32_t> (&c)[3], std::size_t n) {
  const std::vector<unsigned char> in0 = pack(dt, c[0]), in1 = pack(dt, c[1]), in2 = pack(dt, c[2]);
  std::vector<float> acc(n + 1, 12345.0f);  // the extra slot catches writes past n
  acc_load_at(level, dt, in0.data(), acc.data(), n);
  acc_reduce_at(level, dt, op, in1.data(), acc.data(), n);
  acc_reduce_zero_at(level, dt, op, acc.data(), n);
  acc_reduce_at(level, dt, op, in2.data(), acc.data(), n);
  EXPECT_EQ(acc[n], 12345.0f) << "accumulator written past n";
  std::vector<unsigned char> out(n * dtype_size(dt) + 4, 0xee);
  acc_store_at(level, dt, op, acc.data(), n, 4, out.data());
  EXPECT_EQ(out[n * dtype_size(dt)], 0xee) << "output written past n";
  std::vector<std::uint32_t> result(n);
  for (std::size_t i = 0; i < n; ++i) result[i] = unpack(dt, out, i);
  return result;
}

TEST(BlockReduce, EveryDtypeOpAndLevelMatchesReference) {
  std::mt19937 rng(99);
  for (const DataType dt : kDtypes) {
    for (const ReduceOp op : kOps) {
      if (reduce_op_is_bitwise(op) && dt != DataType::i32) continue;  // integers only
      for (std::size_t n = 0; n <= 300; n += (n < 40 ? 1 : 13)) {
        std::vector<std::uint32_t> c[3];
        for (auto& v : c)
          for (std::size_t i = 0; i < n; ++i) v.push_back(random_element(dt, rng));
        const std::vector<std::uint32_t> want = reference_result(dt, op, c, n);
        for (const SimdLevel level : runnable_levels()) {
          const std::vector<std::uint32_t> got = run_kernels(level, dt, op, c, n);
          for (std::size_t i = 0; i < n; ++i) {
            // Which NaN a sum yields depends on operand order inside the adder; only NaN-ness
            // is specified. Everything else, min/max NaNs included, is bit-exact.
            if ((op == ReduceOp::sum || op == ReduceOp::avg || op == ReduceOp::product) && is_nan_pattern(dt, want[i])) {
              ASSERT_TRUE(is_nan_pattern(dt, got[i])) << simd_level_name(level) << " " << dtype_name(dt) << " "
                                                      << reduce_op_name(op) << " n " << n << " i " << i;
              continue;
            }
            ASSERT_EQ(got[i], want[i]) << std::hex << simd_level_name(level) << " " << dtype_name(dt) << " "
                                       << reduce_op_name(op) << std::dec << " n " << n << " i " << i;
          }
        }
      }
    }
  }
}

TEST(BlockReduce, MinMaxPropagateNaNFromEitherSide) {
  for (const SimdLevel level : runnable_levels()) {
    for (const ReduceOp op : {ReduceOp::min, ReduceOp::max}) {
      SCOPED_TRACE(testing::Message() << simd_level_name(level) << " " << reduce_op_name(op));
      // NaN in the accumulator, in the contribution, and in neither (reference point); 19
      // elements so both a vector body and a tail are involved.
      std::vector<float> acc(19, 1.0f), src(19, 2.0f);
      acc[0] = kNaN;
      src[1] = kNaN;
      acc[17] = kNaN;
      src[18] = kNaN;
      acc_reduce_at(level, DataType::f32, op, src.data(), acc.data(), acc.size());
      EXPECT_TRUE(std::isnan(acc[0]));
      EXPECT_TRUE(std::isnan(acc[1]));
      EXPECT_EQ(acc[2], op == ReduceOp::min ? 1.0f : 2.0f);
      EXPECT_TRUE(std::isnan(acc[17]));
      EXPECT_TRUE(std::isnan(acc[18]));
      acc_reduce_zero_at(level, DataType::f32, op, acc.data(), acc.size());
      EXPECT_TRUE(std::isnan(acc[0]));
      EXPECT_EQ(acc[2], op == ReduceOp::min ? 0.0f : 2.0f);

      // Half-width sources: a NaN contribution reaches the narrowed output.
      const std::uint16_t f16_src[3] = {0x7e00, 0x3c00, 0x3c00};
      const std::uint16_t bf16_src[3] = {0x3f80, 0xffc0, 0x3f80};
      std::vector<float> a16(3, 0.5f), ab16(3, 0.5f);
      acc_reduce_at(level, DataType::f16, op, f16_src, a16.data(), 3);
      acc_reduce_at(level, DataType::bf16, op, bf16_src, ab16.data(), 3);
      std::uint16_t out16[3], outb16[3];
      acc_store_at(level, DataType::f16, op, a16.data(), 3, 2, out16);
      acc_store_at(level, DataType::bf16, op, ab16.data(), 3, 2, outb16);
      EXPECT_TRUE((out16[0] & 0x7fff) > 0x7c00);
      EXPECT_TRUE((outb16[1] & 0x7fff) > 0x7f80);
      EXPECT_EQ(out16[2], op == ReduceOp::min ? 0x3800 : 0x3c00);  // 0.5 or 1.0
    }
  }
}

TEST(BlockReduce, IntSumWrapsAndAvgTruncatesTowardZero) {
  for (const SimdLevel level : runnable_levels()) {
    SCOPED_TRACE(simd_level_name(level));
    const std::int32_t a[5] = {INT32_MAX, INT32_MIN, -7, 7, -1};
    const std::int32_t b[5] = {1, -1, 0, 0, 0};
    std::int32_t acc[5];
    acc_load_at(level, DataType::i32, a, acc, 5);
    acc_reduce_at(level, DataType::i32, ReduceOp::sum, b, acc, 5);
    EXPECT_EQ(acc[0], INT32_MIN);
    EXPECT_EQ(acc[1], INT32_MAX);
    std::int32_t out[5];
    acc_store_at(level, DataType::i32, ReduceOp::avg, acc, 5, 2, out);
    EXPECT_EQ(out[0], INT32_MIN / 2);
    EXPECT_EQ(out[1], INT32_MAX / 2);
    EXPECT_EQ(out[2], -3);  // -3.5 truncates to -3, not -4
    EXPECT_EQ(out[3], 3);
    EXPECT_EQ(out[4], 0);
    acc_reduce_zero_at(level, DataType::i32, ReduceOp::min, acc, 5);
    EXPECT_EQ(acc[3], 0);
    EXPECT_EQ(acc[2], -7);
  }
}

TEST(BlockReduce, ZeroStoreAndAvgOfFloats) {
  for (const SimdLevel level : runnable_levels()) {
    std::vector<float> acc(37, 3.0f);
    acc_zero(DataType::f32, acc.data(), acc.size());
    for (const float x : acc) EXPECT_EQ(std::bit_cast<std::uint32_t>(x), 0u);
    const std::vector<float> ones(37, 1.0f);
    acc_reduce_at(level, DataType::f32, ReduceOp::avg, ones.data(), acc.data(), 37);
    acc_reduce_at(level, DataType::f32, ReduceOp::avg, ones.data(), acc.data(), 37);
    std::vector<float> out(37);
    acc_store_at(level, DataType::f32, ReduceOp::avg, acc.data(), 37, 3, out.data());
    for (const float x : out) EXPECT_EQ(x, 2.0f / 3.0f);
    std::vector<std::uint16_t> half(37);
    acc_store_at(level, DataType::bf16, ReduceOp::avg, acc.data(), 37, 4, half.data());
    for (const std::uint16_t h : half) EXPECT_EQ(h, 0x3f00);  // 0.5
  }
}

TEST(BlockReduce, PublicEntryPointsAgree) {
  const float src[4] = {1, -2, 3, -4};
  float acc[4];
  acc_load(DataType::f32, src, acc, 4);
  acc_reduce(DataType::f32, ReduceOp::max, src, acc, 4);
  acc_reduce_zero(DataType::f32, ReduceOp::max, acc, 4);
  float out[4];
  acc_store(DataType::f32, ReduceOp::max, acc, 4, 2, out);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_EQ(out[3], 0.0f);
}

}  // namespace
}  // namespace sparcoll::block

namespace sparcoll::block {
namespace {

// The 64-bit types (their own accumulators, reduce_wide.cpp): every op against plain loops,
// NaN first-wins for min/max, i64 wrapping, op(x, 0) for a zero contribution.
TEST(BlockReduce, WideTypesMatchPlainLoops) {
  const double d_acc[] = {1.5, -2.0, kNaN, 4.0, -0.0}, d_src[] = {2.0, 3.0, 1.0, kNaN, 7.0};
  const std::int64_t l_acc[] = {INT64_MAX, -5, 1LL << 40, 0, 7}, l_src[] = {1, 3, 3, -1, 2};
  for (const ReduceOp op : {ReduceOp::sum, ReduceOp::min, ReduceOp::max, ReduceOp::product}) {
    double acc[5];
    std::memcpy(acc, d_acc, sizeof acc);
    acc_reduce(DataType::f64, op, d_src, acc, 5);
    for (int i = 0; i < 5; ++i) {
      const double a = d_acc[i], b = d_src[i];
      const double want = op == ReduceOp::sum       ? a + b
                          : op == ReduceOp::product ? a * b
                          : a != a                  ? a
                          : op == ReduceOp::min     ? (a < b ? a : b)
                                                    : (a > b ? a : b);
      EXPECT_EQ(std::bit_cast<std::uint64_t>(acc[i]), std::bit_cast<std::uint64_t>(want))
          << reduce_op_name(op) << " f64 element " << i;
    }
  }
  for (const ReduceOp op : {ReduceOp::sum, ReduceOp::min, ReduceOp::max, ReduceOp::product, ReduceOp::band,
                            ReduceOp::bor, ReduceOp::bxor}) {
    std::int64_t acc[5];
    std::memcpy(acc, l_acc, sizeof acc);
    acc_reduce(DataType::i64, op, l_src, acc, 5);
    acc_reduce_zero(DataType::i64, op, acc, 5);
    for (int i = 0; i < 5; ++i) {
      const auto a = static_cast<std::uint64_t>(l_acc[i]), b = static_cast<std::uint64_t>(l_src[i]);
      const auto sa = l_acc[i], sb = l_src[i];
      std::int64_t want = op == ReduceOp::sum       ? static_cast<std::int64_t>(a + b)
                          : op == ReduceOp::product ? static_cast<std::int64_t>(a * b)
                          : op == ReduceOp::min     ? std::min(sa, sb)
                          : op == ReduceOp::max     ? std::max(sa, sb)
                          : op == ReduceOp::band    ? (sa & sb)
                          : op == ReduceOp::bor     ? (sa | sb)
                                                    : (sa ^ sb);
      // Then a contributor whose value is 0.
      if (op == ReduceOp::min) want = std::min<std::int64_t>(want, 0);
      if (op == ReduceOp::max) want = std::max<std::int64_t>(want, 0);
      if (op == ReduceOp::product || op == ReduceOp::band) want = 0;
      EXPECT_EQ(acc[i], want) << reduce_op_name(op) << " i64 element " << i;
    }
  }
  EXPECT_EQ(acc_size(DataType::f64), 8u);
  EXPECT_EQ(acc_size(DataType::i64), 8u);
}

}  // namespace
}  // namespace sparcoll::block
