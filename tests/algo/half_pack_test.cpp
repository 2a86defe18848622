#include "algo/compress/half_pack.hpp"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "block/convert.hpp"

namespace sparcoll::algo::compress {
namespace {

TEST(HalfPack, PacksWithTheBlockConversionsAndAddsIntoFp32) {
  std::mt19937 rng(4);
  std::normal_distribution<float> d(0.0f, 100.0f);
  for (const HalfFormat format : {HalfFormat::f16, HalfFormat::bf16}) {
    for (std::size_t n : {0u, 1u, 7u, 8u, 33u, 1025u}) {
      std::vector<float> v(n), accum(n), unpacked(n);
      for (auto& x : v) x = d(rng);
      for (auto& x : accum) x = d(rng);
      std::vector<std::uint16_t> packed(n);
      half_pack(format, v.data(), n, packed.data());
      const std::vector<float> before = accum;
      half_unpack_add(format, packed.data(), n, accum.data());
      half_unpack(format, packed.data(), n, unpacked.data());
      for (std::size_t i = 0; i < n; ++i) {
        const std::uint16_t want = format == HalfFormat::f16 ? block::f32_to_f16(v[i]) : block::f32_to_bf16(v[i]);
        ASSERT_EQ(packed[i], want) << i;
        const float widened = format == HalfFormat::f16 ? block::f16_to_f32(want) : block::bf16_to_f32(want);
        ASSERT_EQ(unpacked[i], widened);
        ASSERT_EQ(accum[i], before[i] + widened) << i;
      }
    }
  }
}

}  // namespace
}  // namespace sparcoll::algo::compress
