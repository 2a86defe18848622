// The sparse vector kernels of the SparCML algorithms: merge-add against a plain map-based
// merge (every op, both accumulator types, long and short runs), dense <-> sparse conversion,
// and the wire encoding with every malformed message the decoder must refuse.
#include "algo/sparse_vector.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "block/convert.hpp"

namespace sparcoll::algo {
namespace {

std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float float_of(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// A sorted unique vector of about density * dim random indices with values in +-(1..64)/2 (f32)
// or +-(1..64)*1000003 (i32). `runs` makes long consecutive stretches.
SparseVector random_vector(std::mt19937& rng, std::uint32_t dim, double density, DataType acc, bool runs) {
  SparseVector v;
  std::bernoulli_distribution keep(density);
  std::uniform_int_distribution<int> mag(1, 64);
  bool on = false;
  for (std::uint32_t i = 0; i < dim; ++i) {
    if (runs) {
      if (i % 37 == 0) on = keep(rng);
    } else {
      on = keep(rng);
    }
    if (!on) continue;
    const int m = mag(rng) * (rng() % 2 ? -1 : 1);
    v.idx.push_back(i);
    v.val.push_back(acc == DataType::i32 ? static_cast<std::uint32_t>(m * 1000003) : bits_of(0.5f * static_cast<float>(m)));
  }
  return v;
}

// The plain reference: union of indices, op(a, b) with an absent side as 0.
std::map<std::uint32_t, double> reference_merge(const SparseVector& a, const SparseVector& b, DataType acc, ReduceOp op) {
  auto value = [acc](std::uint32_t u) {
    return acc == DataType::i32 ? static_cast<double>(static_cast<std::int32_t>(u)) : static_cast<double>(float_of(u));
  };
  std::map<std::uint32_t, std::pair<double, double>> both;
  for (std::size_t k = 0; k < a.size(); ++k) both[a.idx[k]].first = value(a.val[k]);
  for (std::size_t k = 0; k < b.size(); ++k) both[b.idx[k]].second = value(b.val[k]);
  std::map<std::uint32_t, double> out;
  for (const auto& [i, xy] : both) {
    const auto [x, y] = xy;
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg: out[i] = acc == DataType::i32 ? static_cast<double>(static_cast<std::int32_t>(
                                                              static_cast<std::uint32_t>(static_cast<std::int64_t>(x)) +
                                                              static_cast<std::uint32_t>(static_cast<std::int64_t>(y))))
                                                        : x + y;
        break;
      case ReduceOp::min: out[i] = std::min(x, y); break;
      case ReduceOp::max: out[i] = std::max(x, y); break;
      case ReduceOp::product:  // an index one side lacks is 0 there
        out[i] = acc == DataType::i32 ? static_cast<double>(static_cast<std::int32_t>(
                                            static_cast<std::uint32_t>(static_cast<std::int64_t>(x)) *
                                            static_cast<std::uint32_t>(static_cast<std::int64_t>(y))))
                                      : x * y;
        break;
      case ReduceOp::band:
      case ReduceOp::bor:
      case ReduceOp::bxor: {  // i32 only (the test's parameters)
        const auto a = static_cast<std::int32_t>(x), b = static_cast<std::int32_t>(y);
        out[i] = op == ReduceOp::band ? a & b : op == ReduceOp::bor ? a | b : a ^ b;
        break;
      }
    }
  }
  return out;
}

class MergeTest : public ::testing::TestWithParam<std::tuple<DataType, ReduceOp, bool>> {};

TEST_P(MergeTest, MatchesAPlainMergeOverTheUnionOfIndices) {
  const auto [acc, op, runs] = GetParam();
  std::mt19937 rng(42);
  for (double da : {0.0, 0.01, 0.3, 1.0})
    for (double db : {0.0, 0.05, 0.5, 1.0}) {
      const SparseVector a = random_vector(rng, 3001, da, acc, runs);
      const SparseVector b = random_vector(rng, 3001, db, acc, runs);
      SparseVector out;
      merge(span_of(a), span_of(b), acc, op, &out);
      const auto want = reference_merge(a, b, acc, op);
      ASSERT_EQ(out.size(), want.size()) << "densities " << da << " " << db;
      std::size_t k = 0;
      for (const auto& [i, v] : want) {
        ASSERT_EQ(out.idx[k], i);
        const double got = acc == DataType::i32 ? static_cast<double>(static_cast<std::int32_t>(out.val[k]))
                                                : static_cast<double>(float_of(out.val[k]));
        ASSERT_EQ(got, v) << "index " << i << " densities " << da << " " << db;
        ++k;
      }
    }
}

// Every op on both accumulator types, the bitwise ones on i32 only (they take integers only).
std::vector<std::tuple<DataType, ReduceOp, bool>> merge_cases() {
  std::vector<std::tuple<DataType, ReduceOp, bool>> cases;
  for (DataType acc : {DataType::f32, DataType::i32})
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::min, ReduceOp::max, ReduceOp::product, ReduceOp::band,
                        ReduceOp::bor, ReduceOp::bxor})
      for (bool runs : {false, true})
        if (!reduce_op_is_bitwise(op) || acc == DataType::i32) cases.emplace_back(acc, op, runs);
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Sparse, MergeTest, ::testing::ValuesIn(merge_cases()));

TEST(SparseMerge, TheLeftOperandStaysOnTheLeft) {
  // NaN payloads: op(a, b) must be computed with a first, so every rank that merges the same
  // two vectors the same way gets the same bits.
  SparseVector a, b, ab, ba;
  a.idx = {3};
  a.val = {bits_of(1e30f)};
  b.idx = {3};
  b.val = {bits_of(-1e30f)};
  merge(span_of(a), span_of(b), DataType::f32, ReduceOp::sum, &ab);
  merge(span_of(b), span_of(a), DataType::f32, ReduceOp::sum, &ba);
  ASSERT_EQ(ab.size(), 1u);
  EXPECT_EQ(float_of(ab.val[0]), 0.0f);  // a cancelled sum keeps its index
  EXPECT_EQ(ab.val[0], ba.val[0]);
}

TEST(SparseMerge, EmptySides) {
  SparseVector a, e, out;
  a.idx = {0, 5, 9};
  a.val = {bits_of(1), bits_of(-2), bits_of(3)};
  merge(span_of(a), span_of(e), DataType::f32, ReduceOp::sum, &out);
  EXPECT_EQ(out.idx, a.idx);
  EXPECT_EQ(out.val, a.val);
  merge(span_of(e), span_of(e), DataType::f32, ReduceOp::sum, &out);
  EXPECT_EQ(out.size(), 0u);
  // min with an absent side: op(x, 0).
  merge(span_of(e), span_of(a), DataType::f32, ReduceOp::min, &out);
  EXPECT_EQ(float_of(out.val[0]), 0.0f);
  EXPECT_EQ(float_of(out.val[1]), -2.0f);
  EXPECT_EQ(float_of(out.val[2]), 0.0f);
}

TEST(SparseConvert, DenseToSparseKeepsNonZerosOfEveryDtype) {
  std::mt19937 rng(3);
  for (DataType dt : {DataType::f32, DataType::f16, DataType::bf16, DataType::i32})
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{255}, std::size_t{257}, std::size_t{5000}}) {
      std::vector<float> ref(n, 0.0f);
      std::vector<std::byte> dense(n * dtype_size(dt));
      for (std::size_t i = 0; i < n; ++i) {
        // Zero blocks, sparse blocks and -0.0 (which counts as zero).
        const bool nz = (i / 256) % 3 != 1 && rng() % 4 == 0;
        const float v = nz ? static_cast<float>(static_cast<int>(rng() % 100) - 50) + 0.5f : ((i % 7 == 0) ? -0.0f : 0.0f);
        ref[i] = nz ? v : 0.0f;
        switch (dt) {
          case DataType::f32: std::memcpy(&dense[i * 4], &v, 4); break;
          case DataType::i32: {
            const std::int32_t x = nz ? static_cast<std::int32_t>(v * 2) : 0;
            ref[i] = static_cast<float>(x);
            std::memcpy(&dense[i * 4], &x, 4);
            break;
          }
          case DataType::f16: {
            const std::uint16_t h = block::f32_to_f16(v);
            std::memcpy(&dense[i * 2], &h, 2);
            break;
          }
          case DataType::bf16: {
            const std::uint16_t h = block::f32_to_bf16(v);
            std::memcpy(&dense[i * 2], &h, 2);
            break;
          }
        }
      }
      SparseVector sv;
      std::vector<std::uint64_t> bits;
      const std::size_t begin = n > 10 ? 3 : 0;  // a sub-range: global indices
      dense_to_sparse(dense.data(), begin, n, dt, &sv, &bits);
      std::size_t k = 0;
      for (std::size_t i = begin; i < n; ++i) {
        if (ref[i] == 0.0f) continue;
        ASSERT_LT(k, sv.size());
        ASSERT_EQ(sv.idx[k], i) << dtype_name(dt) << " n=" << n;
        const float got = dt == DataType::i32 ? static_cast<float>(static_cast<std::int32_t>(sv.val[k])) : float_of(sv.val[k]);
        ASSERT_EQ(got, ref[i]);
        ++k;
      }
      EXPECT_EQ(k, sv.size()) << dtype_name(dt) << " n=" << n;
    }
}

TEST(SparseWire, EncodeDecodeRoundTripAndWriteDense) {
  SparseVector v;
  v.idx = {10, 11, 19};
  v.val = {bits_of(1.5f), bits_of(-2.0f), bits_of(4.0f)};
  std::vector<std::byte> msg;
  encode_sparse_acc(slice(v, 0, 3), 10, 20, DataType::f32, &msg);
  EXPECT_EQ(msg.size(), 32u + 3 * 8);
  SparseMessage m;
  bool differs = true;
  ASSERT_EQ(decode(msg.data(), msg.size(), 10, 20, DataType::f32, &m, &differs), "");
  EXPECT_FALSE(differs);
  EXPECT_FALSE(m.dense);
  ASSERT_EQ(m.count, 3u);
  EXPECT_EQ(m.idx[2], 19u);

  // Final values as f16, avg over 2 ranks; then dense.
  encode_sparse_final(slice(v, 0, 3), 10, 20, DataType::f16, ReduceOp::avg, 2, &msg);
  ASSERT_EQ(decode(msg.data(), msg.size(), 10, 20, DataType::f16, &m, &differs), "");
  std::vector<std::uint16_t> out(25, 0xffff);
  write_dense(m, DataType::f16, out.data());
  EXPECT_EQ(out[9], 0xffff);  // outside the range: untouched
  EXPECT_EQ(block::f16_to_f32(out[10]), 0.75f);
  EXPECT_EQ(block::f16_to_f32(out[11]), -1.0f);
  EXPECT_EQ(block::f16_to_f32(out[12]), 0.0f);
  EXPECT_EQ(block::f16_to_f32(out[19]), 2.0f);
  EXPECT_EQ(out[20], 0xffff);

  std::vector<float> acc(10, 0.0f);
  acc[4] = 8.0f;
  encode_dense_final(acc.data(), 10, 20, DataType::f32, ReduceOp::sum, 3, &msg);
  EXPECT_EQ(msg.size(), 32u + 10 * 4);
  ASSERT_EQ(decode(msg.data(), msg.size(), 10, 20, DataType::f32, &m, &differs), "");
  EXPECT_TRUE(m.dense);
  EXPECT_EQ(m.count, 10u);
}

TEST(SparseWire, DecodeRefusesMalformedMessages) {
  SparseVector v;
  v.idx = {10, 12};
  v.val = {bits_of(1.0f), bits_of(2.0f)};
  std::vector<std::byte> good;
  encode_sparse_acc(span_of(v), 10, 20, DataType::f32, &good);
  SparseMessage m;
  bool differs = false;
  auto expect_refused = [&](std::vector<std::byte> msg, const char* mention, bool want_differs = false) {
    const std::string p = decode(msg.data(), msg.size(), 10, 20, DataType::f32, &m, &differs);
    EXPECT_NE(p.find(mention), std::string::npos) << "'" << p << "' should mention '" << mention << "'";
    EXPECT_EQ(differs, want_differs) << p;
  };
  expect_refused(std::vector<std::byte>(good.begin(), good.begin() + 20), "shorter than its 32-byte header");
  auto bad = good;
  bad[0] = std::byte{0};
  expect_refused(bad, "bad header");
  bad = good;
  bad[4] = std::byte{4};  // unknown flag
  expect_refused(bad, "bad header");
  bad = good;
  bad[5] = std::byte{3};  // i32 values
  expect_refused(bad, "dtype differs");
  // Another range: the sender's dim differs.
  std::vector<std::byte> other;
  encode_sparse_acc(span_of(v), 10, 21, DataType::f32, &other);
  expect_refused(other, "dim differs", true);
  bad = good;
  bad.pop_back();
  expect_refused(bad, "header announces");
  // Count larger than the range.
  bad = good;
  const std::uint64_t huge = 11;
  std::memcpy(bad.data() + 24, &huge, 8);
  expect_refused(bad, "items for a range of 10");
  // Indices out of order, repeated, outside the range.
  for (auto [first, second] : {std::pair<std::uint32_t, std::uint32_t>{12, 10}, {10, 10}, {10, 20}, {9, 12}}) {
    bad = good;
    std::memcpy(bad.data() + 32, &first, 4);
    std::memcpy(bad.data() + 36, &second, 4);
    expect_refused(bad, "out of order or outside");
  }
}

TEST(SparseWire, BreakEven) {
  // 4-byte values: dense once half the indices are present; 2-byte values: a third.
  EXPECT_FALSE(dense_is_cheaper(49, 100, 4));
  EXPECT_TRUE(dense_is_cheaper(50, 100, 4));
  EXPECT_FALSE(dense_is_cheaper(33, 100, 2));
  EXPECT_TRUE(dense_is_cheaper(34, 100, 2));
}

}  // namespace
}  // namespace sparcoll::algo
