#include "block/bitmap.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "block/bitmap_kernels.hpp"
#include "simd_levels.hpp"

namespace sparcoll::block {
namespace {

using test::runnable_levels;

constexpr DataType kDtypes[] = {DataType::f32, DataType::f16, DataType::bf16, DataType::i32};

// A tensor as raw element bit patterns, so every dtype is handled by one code path.
struct Tensor {
  DataType dtype;
  std::vector<unsigned char> bytes;

  Tensor(DataType dt, std::size_t n) : dtype(dt), bytes(n * dtype_size(dt)) {}
  std::size_t size() const { return bytes.size() / dtype_size(dtype); }
  void set(std::size_t i, std::uint32_t pattern) {
    if (dtype_size(dtype) == 4) {
      std::memcpy(bytes.data() + i * 4, &pattern, 4);
    } else {
      const auto half = static_cast<std::uint16_t>(pattern);
      std::memcpy(bytes.data() + i * 2, &half, 2);
    }
  }
  std::uint32_t get(std::size_t i) const {
    if (dtype_size(dtype) == 4) {
      std::uint32_t v;
      std::memcpy(&v, bytes.data() + i * 4, 4);
      return v;
    }
    std::uint16_t v;
    std::memcpy(&v, bytes.data() + i * 2, 2);
    return v;
  }
};

// The zero rule, written out per dtype: floats ignore the sign bit, i32 does not.
bool element_nonzero(DataType dt, std::uint32_t pattern) {
  switch (dt) {
    case DataType::f32: return (pattern & 0x7fffffffu) != 0;
    case DataType::f16:
    case DataType::bf16: return (pattern & 0x7fffu) != 0;
    case DataType::i32: return pattern != 0;
    case DataType::f64:
    case DataType::i64: break;  // never scanned (block-sparse takes the 32-bit types)
  }
  return false;
}

// Negative zero for floats (sign set, must still read as zero), plain 0 for i32.
std::uint32_t zero_filler(DataType dt) {
  switch (dt) {
    case DataType::f32: return 0x80000000u;
    case DataType::f16:
    case DataType::bf16: return 0x8000u;
    case DataType::i32: return 0;
    case DataType::f64:
    case DataType::i64: break;
  }
  return 0;
}

std::vector<std::uint64_t> reference_bitmap(const Tensor& t, std::uint32_t block_elems) {
  const std::size_t nblocks = block_count(t.size(), block_elems);
  std::vector<std::uint64_t> bits(bitmap_words(nblocks), 0);
  for (std::size_t i = 0; i < t.size(); ++i)
    if (element_nonzero(t.dtype, t.get(i))) bits[(i / block_elems) >> 6] |= std::uint64_t{1} << ((i / block_elems) & 63);
  return bits;
}

// Scans at `level` into a buffer with garbage before and after, and checks the words written,
// the untouched sentinels and the returned count against the reference.
void expect_scan_matches(SimdLevel level, const Tensor& t, std::uint32_t block_elems) {
  SCOPED_TRACE(testing::Message() << simd_level_name(level) << " " << dtype_name(t.dtype) << " count " << t.size()
                                  << " block " << block_elems);
  const std::vector<std::uint64_t> want = reference_bitmap(t, block_elems);
  constexpr std::uint64_t kSentinel = 0xa5a5a5a5a5a5a5a5ull;
  std::vector<std::uint64_t> got(want.size() + 2, kSentinel);
  const std::size_t n =
      scan_nonzero_blocks_at(level, t.bytes.data(), t.size(), t.dtype, block_elems, got.data() + 1);
  EXPECT_EQ(got.front(), kSentinel);
  EXPECT_EQ(got.back(), kSentinel);
  std::size_t want_count = 0;
  for (std::size_t w = 0; w < want.size(); ++w) {
    EXPECT_EQ(got[w + 1], want[w]) << "word " << w;
    want_count += static_cast<std::size_t>(std::popcount(want[w]));
  }
  EXPECT_EQ(n, want_count);
}

TEST(BlockBitmap, ZeroRulePerDtype) {
  struct Case {
    DataType dtype;
    std::uint32_t pattern;
    bool nonzero;
  };
  const Case cases[] = {
      {DataType::f32, 0x00000000u, false},  {DataType::f32, 0x80000000u, false},  // +0, -0
      {DataType::f32, 0x00000001u, true},   {DataType::f32, 0x80000001u, true},   // denormals
      {DataType::f32, 0x7f800000u, true},   {DataType::f32, 0xff800000u, true},   // +-Inf
      {DataType::f32, 0x7fc00000u, true},   {DataType::f32, 0xffc00001u, true},   // NaN
      {DataType::f32, 0x3f800000u, true},                                          // 1.0
      {DataType::f16, 0x0000u, false},      {DataType::f16, 0x8000u, false},
      {DataType::f16, 0x0001u, true},       {DataType::f16, 0x8001u, true},
      {DataType::f16, 0x7c00u, true},       {DataType::f16, 0xfc00u, true},
      {DataType::f16, 0x7e00u, true},       {DataType::f16, 0x3c00u, true},
      {DataType::bf16, 0x0000u, false},     {DataType::bf16, 0x8000u, false},
      {DataType::bf16, 0x0001u, true},      {DataType::bf16, 0x7f80u, true},
      {DataType::bf16, 0xffc0u, true},      {DataType::bf16, 0x3f80u, true},
      {DataType::i32, 0x00000000u, false},  {DataType::i32, 0x80000000u, true},   // INT32_MIN is not zero
      {DataType::i32, 0xffffffffu, true},   {DataType::i32, 0x00000001u, true},
  };
  for (const SimdLevel level : runnable_levels()) {
    for (const Case& c : cases) {
      SCOPED_TRACE(testing::Message() << simd_level_name(level) << " " << dtype_name(c.dtype) << " 0x" << std::hex
                                      << c.pattern);
      // The value alone, then the value as the last element after a run of (negative) zeros
      // long enough to cross several vectors, so both the vector body and the tail see it.
      for (const std::size_t n : {std::size_t{1}, std::size_t{77}, std::size_t{300}}) {
        Tensor t(c.dtype, n);
        for (std::size_t i = 0; i < n; ++i) t.set(i, zero_filler(c.dtype));
        t.set(n - 1, c.pattern);
        std::uint64_t bits = ~std::uint64_t{0};
        EXPECT_EQ(scan_nonzero_blocks_at(level, t.bytes.data(), n, c.dtype, 512, &bits), c.nonzero ? 1u : 0u);
        EXPECT_EQ(bits, c.nonzero ? 1u : 0u);
        EXPECT_EQ(is_zero_at(level, t.bytes.data(), n, c.dtype), !c.nonzero);
      }
    }
  }
}

TEST(BlockBitmap, EverySinglePosition) {
  // One non-zero element at each position of a tensor with a short last block: every SIMD lane,
  // every unrolled vector and the scalar tail must see it.
  constexpr std::size_t kCount = 700;
  constexpr std::uint32_t kBlock = 256;
  for (const SimdLevel level : runnable_levels()) {
    for (const DataType dt : kDtypes) {
      Tensor t(dt, kCount);
      for (std::size_t i = 0; i < kCount; ++i) t.set(i, zero_filler(dt));
      for (std::size_t pos = 0; pos < kCount; ++pos) {
        t.set(pos, 1);
        std::uint64_t bits = 0;
        ASSERT_EQ(scan_nonzero_blocks_at(level, t.bytes.data(), kCount, dt, kBlock, &bits), 1u)
            << simd_level_name(level) << " " << dtype_name(dt) << " pos " << pos;
        ASSERT_EQ(bits, std::uint64_t{1} << (pos / kBlock)) << simd_level_name(level) << " " << dtype_name(dt);
        t.set(pos, zero_filler(dt));
      }
    }
  }
}

TEST(BlockBitmap, RandomSparseTensorsAndGeometries) {
  std::mt19937_64 rng(12345);
  const std::uint32_t blocks[] = {1, 3, 7, 16, 33, 64, 256, 257};
  for (const SimdLevel level : runnable_levels()) {
    for (const DataType dt : kDtypes) {
      for (const std::uint32_t block : blocks) {
        for (const std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{block} - 1, std::size_t{block},
                                        std::size_t{block} + 1, std::size_t{64} * block + 5,
                                        std::size_t{rng() % 5000}}) {
          Tensor t(dt, count);
          for (std::size_t i = 0; i < count; ++i) t.set(i, zero_filler(dt));
          // About a third of the blocks get one non-zero element at a random place.
          for (std::size_t b = 0; b < block_count(count, block); ++b) {
            if (rng() % 3 != 0) continue;
            const std::size_t first = b * block;
            const std::size_t len = std::min<std::size_t>(block, count - first);
            t.set(first + rng() % len, static_cast<std::uint32_t>(rng()) | 1u);
          }
          expect_scan_matches(level, t, block);
        }
      }
    }
  }
}

TEST(BlockBitmap, UnalignedStart) {
  // A tensor that starts one element into a buffer: 16-bit data is then only 2-byte aligned.
  for (const SimdLevel level : runnable_levels()) {
    for (const DataType dt : kDtypes) {
      const std::size_t esize = dtype_size(dt);
      Tensor whole(dt, 1001);
      for (std::size_t i = 0; i < whole.size(); ++i) whole.set(i, zero_filler(dt));
      whole.set(0, 1);  // outside the view: must not be seen
      whole.set(1 + 300, 0x1234);
      whole.set(1 + 999, 0x0001);
      std::uint64_t bits = 0;
      EXPECT_EQ(scan_nonzero_blocks_at(level, whole.bytes.data() + esize, 1000, dt, 100, &bits), 2u);
      EXPECT_EQ(bits, (std::uint64_t{1} << 3) | (std::uint64_t{1} << 9)) << simd_level_name(level);
    }
  }
}

TEST(BlockBitmap, CountZeroWritesNothing) {
  for (const SimdLevel level : runnable_levels()) {
    std::uint64_t bits = 42;
    EXPECT_EQ(scan_nonzero_blocks_at(level, nullptr, 0, DataType::f32, 256, &bits), 0u);
    EXPECT_EQ(bits, 42u);
    EXPECT_TRUE(is_zero_at(level, nullptr, 0, DataType::f16));
  }
}

TEST(BlockBitmap, LargeTensorsUseEveryThreadCorrectly) {
  // Above the 8 MiB threshold the scan is split over TBB threads in whole bitmap words, as many
  // ranges as the threads set (set_scan_threads); the result must be the same as one thread's.
  const unsigned before = scan_threads();
  std::mt19937_64 rng(777);
  struct Case {
    DataType dtype;
    std::size_t count;
    std::uint32_t block;
  };
  const Case cases[] = {{DataType::f32, (std::size_t{3} << 20) + 123, 256},
                        {DataType::bf16, (std::size_t{5} << 20) + 7, 1000}};
  for (const Case& c : cases) {
    Tensor t(c.dtype, c.count);
    for (std::size_t i = 0; i < c.count; ++i) t.set(i, zero_filler(c.dtype));
    for (std::size_t k = 0; k < c.count / 2000; ++k) t.set(rng() % c.count, 0x3c00u);
    t.set(c.count - 1, 0x0001u);
    for (const unsigned threads : {before, 1u, 2u, 3u, 7u}) {
      set_scan_threads(threads);
      SCOPED_TRACE(testing::Message() << threads << " threads");
      for (const SimdLevel level : runnable_levels()) expect_scan_matches(level, t, c.block);
    }
  }
  set_scan_threads(0);  // at least one
  EXPECT_EQ(scan_threads(), 1u);
  set_scan_threads(before);
}

TEST(BlockBitmap, PublicEntryPointsAgree) {
  Tensor t(DataType::f32, 1000);
  t.set(700, 0x3f800000u);
  std::uint64_t bits = 0;
  EXPECT_EQ(scan_nonzero_blocks(t.bytes.data(), 1000, DataType::f32, 256, &bits), 1u);
  EXPECT_EQ(bits, 1u << 2);
  EXPECT_FALSE(is_zero(t.bytes.data(), 1000, DataType::f32));
  EXPECT_TRUE(is_zero(t.bytes.data(), 700, DataType::f32));
}

// The scan runs AVX2 at most (bitmap.cpp says why), never a level this cpu lacks; at AVX-512 the
// dispatch runs the AVX2 kernel, and finds the same bits, at any alignment.
TEST(BlockBitmap, ScanLevelIsAvx2AtMost) {
  const SimdLevel scan = scan_simd_level();
  EXPECT_TRUE(simd_level_supported(scan));
  EXPECT_EQ(scan, simd_level() >= SimdLevel::avx2 ? SimdLevel::avx2 : simd_level());
  alignas(64) static unsigned char data[64 * 1024 + 128];
  for (std::size_t i = 0; i < sizeof data; i += 4) data[i] = (i / 1024) % 3 == 0 ? 1 : 0;
  for (const std::size_t offset : {0, 16, 64}) {
    std::uint64_t bits = 0, expected = 0;
    const std::size_t count = 64 * 256;  // 64 blocks of 256 f32
    EXPECT_EQ(scan_nonzero_blocks_at(SimdLevel::avx512, data + offset, count, DataType::f32, 256, &bits),
              scan_nonzero_blocks_at(SimdLevel::scalar, data + offset, count, DataType::f32, 256, &expected));
    EXPECT_EQ(bits, expected) << "offset " << offset;
  }
}

}  // namespace
}  // namespace sparcoll::block

// Zero blocks holding -0.0 are reported apart, so in-place callers can normalise them to +0.
TEST(BlockBitmapSignedZero, NegativeZeroBlocksAreMarkedApart) {
  using sparcoll::block::scan_nonzero_blocks;
  std::vector<float> v(4 * 8, 0.0f);  // four blocks of 8
  v[1] = -0.0f;                       // block 0: only a -0.0 -> signed zero
  v[8 + 3] = 2.0f;                    // block 1: non-zero
  v[16 + 0] = -0.0f;                  // block 2: -0.0 and a value -> non-zero
  v[16 + 7] = 1.0f;
  std::uint64_t bits[1] = {~0ull}, signed_zero[1] = {~0ull};
  EXPECT_EQ(scan_nonzero_blocks(v.data(), v.size(), sparcoll::DataType::f32, 8, bits, signed_zero), 2u);
  EXPECT_EQ(bits[0], 0b0110u);
  EXPECT_EQ(signed_zero[0], 0b0001u);
  std::vector<std::int32_t> ints(16, 0);  // integers have no signed zero
  ints[9] = static_cast<std::int32_t>(0x80000000u);
  EXPECT_EQ(scan_nonzero_blocks(ints.data(), ints.size(), sparcoll::DataType::i32, 8, bits, signed_zero), 1u);
  EXPECT_EQ(bits[0], 0b10u);
  EXPECT_EQ(signed_zero[0], 0u);
  std::vector<std::uint16_t> halves(8, 0);
  halves[5] = 0x8000;  // -0.0 in fp16
  EXPECT_EQ(scan_nonzero_blocks(halves.data(), halves.size(), sparcoll::DataType::f16, 4, bits, signed_zero), 0u);
  EXPECT_EQ(signed_zero[0], 0b10u);
}
