// Block sets (src/algo/block_set.hpp): packed, parsed, merged and unpacked against plain loops,
// and every malformed message refused with what is wrong.
#include "algo/block_set.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "block/bitmap.hpp"

namespace sparcoll::algo {
namespace {

constexpr std::uint32_t kBlock = 8;

// count floats whose block b is non-zero when pick(b); values small integers (exact sums).
template <typename F>
std::vector<float> tensor(std::size_t count, std::uint64_t seed, F pick) {
  std::mt19937_64 rng(seed);
  std::vector<float> t(count, 0.0f);
  for (std::size_t i = 0; i < count; ++i)
    if (pick(i / kBlock)) t[i] = static_cast<float>(static_cast<int>(rng() % 15) - 7);
  return t;
}

std::vector<std::byte> pack(const std::vector<float>& t, const BlockGeometry& g) {
  std::vector<std::uint64_t> bits(g.words() + 1, 0);
  block::scan_nonzero_blocks(t.data(), t.size(), DataType::f32, kBlock, bits.data());
  std::vector<std::byte> set;
  pack_block_set(t.data(), DataType::f32, bits.data(), g, &set);
  return set;
}

BlockSetView parse_ok(const std::vector<std::byte>& set, const BlockGeometry& g) {
  BlockSetView view;
  bool mismatch = true;
  EXPECT_EQ(parse_block_set(set.data(), set.size(), g, &view, &mismatch), "");
  EXPECT_FALSE(mismatch);
  return view;
}

std::string parse_error(const std::vector<std::byte>& set, const BlockGeometry& g, bool* mismatch) {
  BlockSetView view;
  return parse_block_set(set.data(), set.size(), g, &view, mismatch);
}

TEST(BlockSet, PackedAndUnpackedGivesTheTensorBackWithZeroBlocksAsPlusZero) {
  for (const std::size_t count : {0u, 1u, 7u, 8u, 9u, 517u, 1283u}) {
    const BlockGeometry g{count, kBlock, DataType::f32};
    auto t = tensor(count, count, [](std::size_t b) { return b % 3 != 1; });
    if (count > 9) t[kBlock + 1] = -0.0f;  // block 1 stays "zero": only a -0.0 in it
    const auto set = pack(t, g);
    const BlockSetView view = parse_ok(set, g);
    std::vector<float> out(count, 42.0f);
    unpack_block_set(view, g, DataType::f32, ReduceOp::sum, 1, out.data());
    for (std::size_t i = 0; i < count; ++i) {
      ASSERT_EQ(out[i], t[i]) << "count " << count << " element " << i;
      ASSERT_FALSE(std::signbit(out[i]) && out[i] == 0.0f) << "a zero block comes out +0, element " << i;
    }
  }
}

TEST(BlockSet, MergeCombinesSharedBlocksAndKeepsTheOthersAsOpWithZero) {
  const std::size_t count = 8 * 70 + 3;  // 71 blocks, the last one short
  const BlockGeometry g{count, kBlock, DataType::f32};
  const auto a = tensor(count, 1, [](std::size_t b) { return b % 2 == 0 || b == 70; });
  const auto b = tensor(count, 2, [](std::size_t b) { return b % 3 == 0; });
  const auto sa = pack(a, g), sb = pack(b, g);
  for (const ReduceOp op : {ReduceOp::sum, ReduceOp::min, ReduceOp::max, ReduceOp::product}) {
    std::vector<std::byte> merged;
    merge_block_sets(parse_ok(sa, g), parse_ok(sb, g), g, op, &merged);
    const BlockSetView view = parse_ok(merged, g);
    std::vector<float> out(count);
    unpack_block_set(view, g, DataType::f32, op, 2, out.data());
    for (std::size_t i = 0; i < count; ++i) {
      const float want = op == ReduceOp::sum       ? a[i] + b[i]
                         : op == ReduceOp::min     ? std::min(a[i], b[i])
                         : op == ReduceOp::product ? a[i] * b[i]
                                                   : std::max(a[i], b[i]);
      ASSERT_EQ(out[i], want) << "op " << static_cast<int>(op) << " element " << i;
    }
  }
}

TEST(BlockSet, MergingIntoTheTensorGivesTheBitsOfMergeThenUnpack) {
  for (const std::size_t count : {0u, 1u, 9u, 8u * 70 + 3, 8u * 128}) {
    const BlockGeometry g{count, kBlock, DataType::f32};
    auto a = tensor(count, 3, [](std::size_t b) { return b % 2 == 0 || b == 70; });
    auto b = tensor(count, 4, [](std::size_t b) { return b % 3 == 0; });
    if (count > 3 * kBlock) {
      a[2 * kBlock] = -0.0f;  // a -0 in a shared block: kept as the merge keeps it
      b[kBlock] = -0.0f;      // block 1: only a -0, so absent from b's set and zero in the result
    }
    const auto sa = pack(a, g), sb = pack(b, g);
    for (const ReduceOp op : {ReduceOp::sum, ReduceOp::min, ReduceOp::max, ReduceOp::product}) {
      std::vector<std::byte> merged;
      merge_block_sets(parse_ok(sa, g), parse_ok(sb, g), g, op, &merged);
      std::vector<float> want(count, 42.0f), got(count, 42.0f);
      unpack_block_set(parse_ok(merged, g), g, DataType::f32, op, 2, want.data());
      ASSERT_TRUE(merge_block_sets_into(parse_ok(sa, g), parse_ok(sb, g), g, DataType::f32, op, got.data()));
      ASSERT_TRUE(count == 0 || std::memcmp(want.data(), got.data(), count * 4) == 0)  // data() is null at 0
          << "count " << count << " op " << static_cast<int>(op);
    }
  }
  // Where the accumulators are not the result's bytes it writes nothing and says so.
  const BlockGeometry g{16, kBlock, DataType::f32};
  const auto t = tensor(16, 5, [](std::size_t) { return true; });
  const auto set = pack(t, g);
  std::vector<std::uint16_t> half(16, 7);
  EXPECT_FALSE(merge_block_sets_into(parse_ok(set, g), parse_ok(set, g), g, DataType::f16, ReduceOp::sum, half.data()));
  std::vector<float> out(16, 42.0f);
  EXPECT_FALSE(merge_block_sets_into(parse_ok(set, g), parse_ok(set, g), g, DataType::f32, ReduceOp::avg, out.data()));
  EXPECT_EQ(half[0], 7);
  EXPECT_EQ(out[0], 42.0f);
}

// In place (recv holds this rank's own input, b): a block absent from the result is zero in b
// too, so only b's zero blocks holding a -0.0 (the scan's signed_zero_bits) are written, and the
// bytes are those of writing every absent block. An absent block not in to_clear is not touched.
TEST(BlockSet, InPlaceOnlyTheNegativeZeroBlocksAreWrittenWithTheSameBits) {
  for (const std::size_t count : {0u, 1u, 9u, 8u * 70 + 3, 8u * 128}) {
    const BlockGeometry g{count, kBlock, DataType::f32};
    const auto a = tensor(count, 5, [](std::size_t b) { return b % 5 == 0; });
    auto b = tensor(count, 6, [](std::size_t b) { return b % 7 == 3; });
    if (count > 3 * kBlock) b[kBlock + 2] = -0.0f;  // block 1: only a -0, zero on both ranks
    std::vector<std::uint64_t> bits(g.words() + 1, 0), signed_zero(g.words() + 1, 0);
    block::scan_nonzero_blocks(b.data(), count, DataType::f32, kBlock, bits.data(), signed_zero.data());
    std::vector<std::byte> sb;
    pack_block_set(b.data(), DataType::f32, bits.data(), g, &sb);
    const auto sa = pack(a, g);
    for (const ReduceOp op : {ReduceOp::sum, ReduceOp::min, ReduceOp::max}) {
      std::vector<float> want(count, 42.0f), got = b;
      ASSERT_TRUE(merge_block_sets_into(parse_ok(sa, g), parse_ok(sb, g), g, DataType::f32, op, want.data()));
      ASSERT_TRUE(merge_block_sets_into(parse_ok(sa, g), parse_ok(sb, g), g, DataType::f32, op, got.data(),
                                        signed_zero.data()));
      ASSERT_TRUE(count == 0 || std::memcmp(want.data(), got.data(), count * 4) == 0)
          << "count " << count << " op " << static_cast<int>(op);
      std::vector<std::byte> merged;
      merge_block_sets(parse_ok(sa, g), parse_ok(sb, g), g, op, &merged);
      std::vector<float> unpacked = b;
      unpack_block_set(parse_ok(merged, g), g, DataType::f32, op, 2, unpacked.data(), signed_zero.data());
      ASSERT_TRUE(count == 0 || std::memcmp(want.data(), unpacked.data(), count * 4) == 0)
          << "unpacked, count " << count << " op " << static_cast<int>(op);
    }
    if (count > 3 * kBlock) {
      EXPECT_TRUE(block::test_bit(signed_zero.data(), 1)) << "the scan marks the -0 block";
      // Block 2 is in neither set and holds +0 already: with nothing to clear it is left alone.
      std::vector<float> untouched(count, 42.0f);
      const std::vector<std::uint64_t> none(g.words() + 1, 0);
      ASSERT_TRUE(merge_block_sets_into(parse_ok(sa, g), parse_ok(sb, g), g, DataType::f32, ReduceOp::sum,
                                        untouched.data(), none.data()));
      EXPECT_EQ(untouched[2 * kBlock], 42.0f);
    }
  }
}

TEST(BlockSet, AWholeTensorsSetIsItsHeadThenTheTensorItself) {
  for (const std::size_t count : {1u, 8u, 9u, 8u * 70 + 3}) {
    const BlockGeometry g{count, kBlock, DataType::f32};
    auto t = tensor(count, 6, [](std::size_t) { return true; });
    for (std::size_t b = 0; b * kBlock < count; ++b) t[b * kBlock] = 1.0f;  // no block all zero
    std::vector<std::uint64_t> bits(g.words() + 1, 0);
    block::scan_nonzero_blocks(t.data(), count, DataType::f32, kBlock, bits.data());
    std::vector<std::byte> head;
    ASSERT_TRUE(block_set_head_of_whole(DataType::f32, bits.data(), g, &head)) << "count " << count;
    std::vector<std::byte> wire = head;
    const auto* bytes = reinterpret_cast<const std::byte*>(t.data());
    wire.insert(wire.end(), bytes, bytes + count * 4);
    EXPECT_EQ(wire, pack(t, g)) << "count " << count;
    const BlockSetView view = view_block_set(head, g, t.data());
    EXPECT_EQ(view.present, g.blocks());
    EXPECT_EQ(static_cast<const void*>(view.values), static_cast<const void*>(t.data()));
    // A zero block, or accumulators that are not the tensor's bytes: pack it instead.
    if (count > kBlock) {
      std::fill(t.begin(), t.begin() + kBlock, 0.0f);
      std::fill(bits.begin(), bits.end(), 0);
      block::scan_nonzero_blocks(t.data(), count, DataType::f32, kBlock, bits.data());
      head.assign(3, std::byte{9});
      EXPECT_FALSE(block_set_head_of_whole(DataType::f32, bits.data(), g, &head));
      EXPECT_EQ(head.size(), 3u);
    }
    const BlockGeometry half{count, kBlock, DataType::f32};
    EXPECT_FALSE(block_set_head_of_whole(DataType::f16, bits.data(), half, &head));
  }
  const BlockGeometry empty{0, kBlock, DataType::f32};
  std::vector<std::uint64_t> none(1, 0);
  std::vector<std::byte> head;
  EXPECT_FALSE(block_set_head_of_whole(DataType::f32, none.data(), empty, &head));
}

// In place, this rank's whole tensor in recv, the other set on either side: the bits of
// merge_block_sets then unpack, including where the order of the operands shows (min and max
// of -0 and +0 take the right one; a sum of two NaNs keeps the left one's payload).
TEST(BlockSet, MergingIntoAWholeTensorInPlaceGivesTheBitsOfMergeThenUnpack) {
  for (const std::size_t count : {1u, 9u, 8u * 70 + 3, 8u * 128}) {
    const BlockGeometry g{count, kBlock, DataType::f32};
    auto mine = tensor(count, 7, [](std::size_t) { return true; });
    for (std::size_t b = 0; b * kBlock < count; ++b) mine[b * kBlock] = 3.0f;
    auto other = tensor(count, 8, [](std::size_t b) { return b % 3 != 1; });
    if (count > 2 * kBlock) {
      mine[1] = -0.0f;
      other[1] = 0.0f;
      mine[2] = 0.0f;
      other[2] = -0.0f;
      std::uint32_t nan_a = 0x7fc00001, nan_b = 0x7fc00002;
      std::memcpy(&mine[3], &nan_a, 4);
      std::memcpy(&other[3], &nan_b, 4);
    }
    std::vector<std::uint64_t> bits(g.words() + 1, 0);
    block::scan_nonzero_blocks(mine.data(), count, DataType::f32, kBlock, bits.data());
    std::vector<std::byte> head;
    ASSERT_TRUE(block_set_head_of_whole(DataType::f32, bits.data(), g, &head));
    const auto other_set = pack(other, g);
    for (const ReduceOp op : {ReduceOp::sum, ReduceOp::min, ReduceOp::max, ReduceOp::product}) {
      for (const bool other_is_left : {true, false}) {
        const BlockSetView mine_view = view_block_set(head, g, mine.data());
        const BlockSetView other_view = parse_ok(other_set, g);
        std::vector<std::byte> merged;
        merge_block_sets(other_is_left ? other_view : mine_view, other_is_left ? mine_view : other_view, g, op,
                         &merged);
        std::vector<float> want(count, 42.0f);
        unpack_block_set(parse_ok(merged, g), g, DataType::f32, op, 2, want.data());
        std::vector<float> got = mine;  // recv, in place
        std::vector<std::byte> received = other_set;
        const BlockSetView received_view = parse_ok(received, g);
        std::byte* values = received.data() + (received_view.values - received.data());
        ASSERT_TRUE(merge_block_set_into_whole(received_view, values, other_is_left, g, DataType::f32, op, got.data()));
        ASSERT_EQ(std::memcmp(want.data(), got.data(), count * 4), 0)
            << "count " << count << " op " << static_cast<int>(op) << (other_is_left ? " other left" : " other right");
      }
    }
    std::vector<float> got = mine;
    std::vector<std::byte> received = other_set;
    const BlockSetView received_view = parse_ok(received, g);
    std::byte* values = received.data() + (received_view.values - received.data());
    EXPECT_FALSE(merge_block_set_into_whole(received_view, values, true, g, DataType::f32, ReduceOp::avg, got.data()));
    EXPECT_EQ(std::memcmp(got.data(), mine.data(), count * 4), 0);
  }
}

TEST(BlockSet, AMalformedMessageIsRefusedWithWhatIsWrong) {
  const std::size_t count = 8 * 100 + 5;  // 101 blocks: two bitmap words, the second partly used
  const BlockGeometry g{count, kBlock, DataType::f32};
  const auto good = pack(tensor(count, 3, [](std::size_t b) { return b % 4 == 0 || b == 100; }), g);
  bool mismatch = false;

  auto bad = good;
  bad.resize(10);
  EXPECT_NE(parse_error(bad, g, &mismatch).find("fewer than a block set's header"), std::string::npos);

  bad = good;
  bad[0] = std::byte{0};
  EXPECT_NE(parse_error(bad, g, &mismatch).find("not a block set"), std::string::npos);

  bad = good;
  bad.resize(sizeof(BlockSetHeader) + 12);
  EXPECT_NE(parse_error(bad, g, &mismatch).find("bitmap is cut short"), std::string::npos);

  bad = good;  // a bit beyond block 100
  bad[sizeof(BlockSetHeader) + 8 + 6] |= std::byte{0x40};
  EXPECT_NE(parse_error(bad, g, &mismatch).find("beyond the tensor's end"), std::string::npos);

  bad = good;  // one more block in the bitmap than the header counts
  bad[sizeof(BlockSetHeader)] |= std::byte{0x02};
  EXPECT_NE(parse_error(bad, g, &mismatch).find("header counts"), std::string::npos);

  bad = good;
  bad.pop_back();
  EXPECT_NE(parse_error(bad, g, &mismatch).find("blocks take"), std::string::npos);
  EXPECT_FALSE(mismatch);

  // Well formed, but another tensor: a mismatch between the ranks, not a corrupt message.
  const BlockGeometry other{count + 1, kBlock, DataType::f32};
  EXPECT_NE(parse_error(good, other, &mismatch).find("this rank has 806"), std::string::npos);
  EXPECT_TRUE(mismatch);
  const BlockGeometry ints{count, kBlock, DataType::i32};
  EXPECT_NE(parse_error(good, ints, &mismatch).find("f32 accumulators"), std::string::npos);
  EXPECT_TRUE(mismatch);
}

}  // namespace
}  // namespace sparcoll::algo
