// Fuzz target: the block-set parser of block recursive doubling (algo::parse_block_set in
// src/algo/block_set_wire.cpp), which every message of that algorithm goes through.
//
// 1. The input as a received message, checked against this rank's tensor geometry: either the
//    geometry the header itself claims (small enough to reach the bitmap and value checks), or a
//    fixed one (mostly a mismatch). An accepted set has exactly as many bitmap bits as the header
//    counts, none beyond the tensor's last block, and values that fill the message to its last
//    byte; every byte of the view is read. A refusal says why; a mismatch is a well-formed header.
// 2. The same bytes as choices for a valid set, built as pack_block_set lays it out: parsed back
//    with the same bitmap and values, then one byte flipped: refused or still consistent.
#include <fuzzer/FuzzedDataProvider.h>

#include <bit>
#include <cstring>
#include <vector>

#include "algo/block_set.hpp"
#include "fuzz_check.hpp"

namespace sparcoll::fuzz {
namespace {

using algo::BlockGeometry;
using algo::BlockSetHeader;
using algo::BlockSetView;

constexpr std::uint64_t kMaxCount = 1 << 16;

// What parse_block_set promises about an accepted set.
void check_accepted(const std::byte* data, std::size_t size, const BlockGeometry& g, const BlockSetView& v) {
  const std::size_t words = g.words(), nblocks = g.blocks();
  FUZZ_CHECK(reinterpret_cast<const std::byte*>(v.bits) == data + sizeof(BlockSetHeader));
  FUZZ_CHECK(v.values == data + sizeof(BlockSetHeader) + words * 8);
  std::size_t present = 0;
  bool last = false;
  for (std::size_t b = 0; b < words * 64; ++b) {
    const bool set = (v.bits[b / 64] >> (b % 64)) & 1;
    FUZZ_CHECK(!set || b < nblocks);
    present += set;
    if (set && b + 1 == nblocks) last = true;
  }
  FUZZ_CHECK(present == v.present);
  FUZZ_CHECK(v.values + algo::block_set_value_bytes(g, present, last) == data + size);
  touch(data, size);
}

void parse_raw(const std::uint8_t* bytes, std::size_t size) {
  const ExactCopy copy(bytes, size);
  BlockGeometry g{1000, 8, DataType::f32};
  BlockSetHeader h{};
  if (size >= sizeof h) {
    std::memcpy(&h, bytes, sizeof h);
    if (h.count <= kMaxCount && h.block_elems >= 1 && h.block_elems <= 4096 && (h.acc_type == 0 || h.acc_type == 3))
      g = BlockGeometry{static_cast<std::size_t>(h.count), h.block_elems, static_cast<DataType>(h.acc_type)};
  }
  BlockSetView v;
  bool mismatch = false;
  const std::string problem = algo::parse_block_set(copy.data(), copy.size(), g, &v, &mismatch);
  if (problem.empty()) {
    FUZZ_CHECK(!mismatch);
    check_accepted(copy.data(), copy.size(), g, v);
  } else {
    FUZZ_CHECK(!mismatch || (size >= sizeof h && h.magic == algo::kBlockSetMagic));
  }
}

void round_trip(FuzzedDataProvider& in) {
  const BlockGeometry g{in.ConsumeIntegralInRange<std::size_t>(0, 4096), in.ConsumeIntegralInRange<std::uint32_t>(1, 64),
                        in.ConsumeBool() ? DataType::f32 : DataType::i32};
  const std::size_t words = g.words(), nblocks = g.blocks();
  std::vector<std::uint64_t> bits(words, 0);
  std::size_t present = 0;
  bool last = false;
  for (std::size_t b = 0; b < nblocks; ++b)
    if (in.ConsumeBool()) {
      bits[b / 64] |= std::uint64_t{1} << (b % 64);
      ++present;
      last = last || b + 1 == nblocks;
    }
  const std::size_t value_bytes = algo::block_set_value_bytes(g, present, last);
  const BlockSetHeader h{algo::kBlockSetMagic, algo::kBlockSetVersion, static_cast<std::uint8_t>(g.acc_type), 0,
                         g.block_elems, static_cast<std::uint32_t>(present), g.count};
  std::vector<std::byte> message(sizeof h + words * 8 + value_bytes);
  std::memcpy(message.data(), &h, sizeof h);
  if (words > 0) std::memcpy(message.data() + sizeof h, bits.data(), words * 8);
  for (std::size_t i = 0; i < value_bytes; ++i) message[sizeof h + words * 8 + i] = std::byte{static_cast<unsigned char>(i * 7)};
  {
    const ExactCopy copy(message.data(), message.size());
    BlockSetView v;
    bool mismatch = true;
    FUZZ_CHECK(algo::parse_block_set(copy.data(), copy.size(), g, &v, &mismatch).empty());
    FUZZ_CHECK(!mismatch && v.present == present);
    FUZZ_CHECK(words == 0 || std::memcmp(v.bits, bits.data(), words * 8) == 0);
    check_accepted(copy.data(), copy.size(), g, v);
  }
  if (message.empty()) return;
  const std::size_t at = in.ConsumeIntegralInRange<std::size_t>(0, message.size() - 1);
  message[at] ^= std::byte{static_cast<unsigned char>(in.ConsumeIntegralInRange<int>(1, 255))};
  const ExactCopy copy(message.data(), message.size());
  BlockSetView v;
  bool mismatch = false;
  if (algo::parse_block_set(copy.data(), copy.size(), g, &v, &mismatch).empty())
    check_accepted(copy.data(), copy.size(), g, v);
}

}  // namespace
}  // namespace sparcoll::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  sparcoll::fuzz::parse_raw(data, size);
  FuzzedDataProvider in(data, size);
  sparcoll::fuzz::round_trip(in);
  return 0;
}
