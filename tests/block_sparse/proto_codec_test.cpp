// proto::decode: valid window/result/error/abort messages are accepted and described exactly;
// each malformation is refused with its DecodeError; a seeded mutation fuzz never reads outside
// the message and never accepts an inconsistent one.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "job_simulator.hpp"
#include "proto/wire.hpp"

namespace sparcoll::testing {
namespace {

using proto::DecodeError;
using proto::Geometry;
using proto::kEnd;
using proto::MessageView;
using proto::MsgType;
using proto::WireHeader;

constexpr std::uint32_t kProcs = 4;

Geometry geom(std::uint64_t count, std::uint32_t block_elems, std::uint32_t lanes, DataType dt = DataType::f32) {
  Geometry g;
  g.count = count;
  g.block_elems = block_elems;
  g.num_lanes = lanes;
  g.dtype = dt;
  return g;
}

// A window or result carrying `indices` with recognisable block bytes.
RawMessage blocks_message(MsgType type, const Geometry& g, std::uint32_t lane, std::uint32_t sender,
                          const std::vector<std::uint64_t>& indices, std::uint64_t next, bool final = true) {
  WireHeader h = proto::make_header(type, g, ReduceOp::sum, 9, 3, lane, sender);
  h.next_index = next;
  if (type == MsgType::result && final) h.flags = proto::kFlagFinal;
  std::vector<std::byte> data;
  for (std::uint64_t b : indices) {
    const std::uint64_t n = g.block_bytes_at(b);
    for (std::uint64_t i = 0; i < n; ++i) data.push_back(static_cast<std::byte>((b * 7 + i) & 0xff));
  }
  return build_message(h, indices, data.data(), data.size());
}

RawMessage reason_message(MsgType type, const Geometry& g, std::uint32_t lane, std::uint32_t sender,
                          const std::string& reason) {
  WireHeader h = proto::make_header(type, g, ReduceOp::max, 9, 3, lane, sender);
  h.status = static_cast<std::uint32_t>(ErrorCode::mismatch);
  return build_reason_message(h, reason);
}

DecodeError decode(const RawMessage& m, MessageView* v = nullptr, std::uint32_t nprocs = kProcs) {
  MessageView local;
  return proto::decode(m.data(), m.size, nprocs, v ? v : &local);
}

TEST(ProtoCodec, MakeHeaderFillsEveryField) {
  const Geometry g = geom(1000, 16, 3, DataType::bf16);
  const WireHeader h = proto::make_header(MsgType::result, g, ReduceOp::avg, 11, 22, 2, 1);
  EXPECT_EQ(h.magic, proto::kMagic);
  EXPECT_EQ(h.version, proto::kVersion);
  EXPECT_EQ(h.type, static_cast<std::uint8_t>(MsgType::result));
  EXPECT_EQ(h.dtype, static_cast<std::uint8_t>(DataType::bf16));
  EXPECT_EQ(h.redop, static_cast<std::uint8_t>(ReduceOp::avg));
  EXPECT_EQ(h.job_epoch, 11u);
  EXPECT_EQ(h.op_id, 22u);
  EXPECT_EQ(h.lane, 2u);
  EXPECT_EQ(h.sender, 1u);
  EXPECT_EQ(h.count, 1000u);
  EXPECT_EQ(h.next_index, kEnd);
  EXPECT_EQ(h.block_elems, 16u);
  EXPECT_EQ(h.num_lanes, 3u);
  EXPECT_EQ(h.nblocks, 0u);
  EXPECT_EQ(h.payload_len, 0u);
  EXPECT_EQ(h.flags, 0u);
  EXPECT_EQ(h.reserved, 0u);
}

TEST(ProtoCodec, AcceptsWindowWithShortTailBlock) {
  // 10 f32 in blocks of 4: blocks 0, 1 full, block 2 has 2 elements. Lane 0 of 2: blocks 0 and 2.
  const Geometry g = geom(10, 4, 2);
  RawMessage m = blocks_message(MsgType::window, g, 0, 2, {0, 2}, kEnd);
  EXPECT_EQ(m.size, 64u + 16 + 16 + 8);
  MessageView v;
  ASSERT_EQ(decode(m, &v), DecodeError::none);
  EXPECT_EQ(reinterpret_cast<const std::byte*>(v.header), m.data());
  ASSERT_NE(v.indices, nullptr);
  EXPECT_EQ(v.indices[0], 0u);
  EXPECT_EQ(v.indices[1], 2u);
  EXPECT_EQ(v.blocks, m.data() + 64 + 16);
  EXPECT_EQ(v.geometry.count, 10u);
  EXPECT_EQ(v.geometry.block_elems, 4u);
  EXPECT_EQ(v.geometry.num_lanes, 2u);
  EXPECT_EQ(v.geometry.dtype, DataType::f32);
  EXPECT_EQ(v.geometry.nblocks(), 3u);
  EXPECT_EQ(v.reason, nullptr);
  EXPECT_EQ(std::to_integer<int>(v.blocks[16]), (2 * 7) & 0xff);  // first byte of block 2
  std::vector<std::uint64_t> idx{0, 2};
  EXPECT_EQ(proto::payload_bytes(g, idx.data(), 2), 16u + 16 + 8);
}

TEST(ProtoCodec, AcceptsWindowWithNextPointer) {
  const Geometry g = geom(100, 1, 3);
  EXPECT_EQ(decode(blocks_message(MsgType::window, g, 1, 0, {1, 4, 7}, 10)), DecodeError::none);
  EXPECT_EQ(decode(blocks_message(MsgType::window, g, 1, 0, {}, kEnd)), DecodeError::none);  // empty first window
  EXPECT_EQ(decode(blocks_message(MsgType::window, g, 1, 0, {}, 97)), DecodeError::none);  // decode leaves this to the aggregator
  EXPECT_EQ(decode(blocks_message(MsgType::window, geom(0, 4, 5), 4, 3, {}, kEnd)), DecodeError::none);  // count 0
}

TEST(ProtoCodec, AcceptsResults) {
  const Geometry g = geom(50, 4, 2, DataType::f16);  // 13 blocks; block 12 has 2 elements
  MessageView v;
  RawMessage fin = blocks_message(MsgType::result, g, 0, 1, {0, 2, 12}, kEnd);
  ASSERT_EQ(decode(fin, &v), DecodeError::none);
  EXPECT_EQ(v.header->nblocks, 3u);
  EXPECT_EQ(v.header->payload_len, 24u + 8 + 8 + 4);
  EXPECT_EQ(decode(blocks_message(MsgType::result, g, 0, 1, {0, 2}, 6)), DecodeError::none);
  // A non-final chunk's next_index is not meaningful and not checked.
  EXPECT_EQ(decode(blocks_message(MsgType::result, g, 0, 1, {4}, 3, false)), DecodeError::none);
  EXPECT_EQ(decode(blocks_message(MsgType::result, g, 1, 1, {}, 5)), DecodeError::none);
}

TEST(ProtoCodec, AcceptsErrorAndAbort) {
  const Geometry g = geom(10, 4, 2);
  for (MsgType t : {MsgType::error, MsgType::abort}) {
    MessageView v;
    RawMessage m = reason_message(t, g, 1, 3, "rank 1 aborted: because");
    ASSERT_EQ(decode(m, &v), DecodeError::none);
    EXPECT_EQ(std::string(v.reason, v.reason_len), "rank 1 aborted: because");
    EXPECT_EQ(reinterpret_cast<const std::byte*>(v.reason), m.data() + 64);
    EXPECT_EQ(v.indices, nullptr);
    EXPECT_EQ(v.header->status, static_cast<std::uint32_t>(ErrorCode::mismatch));
    EXPECT_EQ(decode(reason_message(t, g, 1, 3, "")), DecodeError::none);
    EXPECT_EQ(decode(reason_message(t, g, 1, 3, std::string(proto::kMaxReasonBytes, 'x'))), DecodeError::none);
    EXPECT_EQ(decode(reason_message(t, g, 1, 3, std::string(proto::kMaxReasonBytes + 1, 'x'))), DecodeError::bad_length);
    RawMessage with_blocks = reason_message(t, g, 1, 3, "abcdefgh");
    with_blocks.header().nblocks = 1;
    EXPECT_EQ(decode(with_blocks), DecodeError::bad_length);
  }
  // An abort carries count 0 (the count may be what was invalid).
  EXPECT_EQ(decode(reason_message(MsgType::abort, geom(0, 4, 2), 1, 0, "bad count")), DecodeError::none);
}

TEST(ProtoCodec, RejectsFramingErrors) {
  const Geometry g = geom(10, 4, 2);
  const RawMessage ok = blocks_message(MsgType::window, g, 0, 1, {0, 2}, kEnd);
  MessageView v;
  EXPECT_EQ(proto::decode(ok.data(), 0, kProcs, &v), DecodeError::too_short);
  EXPECT_EQ(proto::decode(ok.data(), 63, kProcs, &v), DecodeError::too_short);
  auto mutated = [&](auto f) {
    RawMessage m = ok;
    f(m.header());
    return decode(m);
  };
  EXPECT_EQ(mutated([](WireHeader& h) { h.magic = 0x5343; }), DecodeError::bad_magic);
  EXPECT_EQ(mutated([](WireHeader& h) { h.version = 0; }), DecodeError::bad_version);
  EXPECT_EQ(mutated([](WireHeader& h) { h.version = 2; }), DecodeError::bad_version);
  EXPECT_EQ(mutated([](WireHeader& h) { h.type = 0; }), DecodeError::bad_type);
  EXPECT_EQ(mutated([](WireHeader& h) { h.type = 5; }), DecodeError::bad_type);
  EXPECT_EQ(mutated([](WireHeader& h) { h.type = 255; }), DecodeError::bad_type);
  EXPECT_EQ(mutated([](WireHeader& h) { h.dtype = 4; }), DecodeError::bad_dtype);
  EXPECT_EQ(mutated([](WireHeader& h) { h.dtype = 255; }), DecodeError::bad_dtype);
  EXPECT_EQ(mutated([](WireHeader& h) { h.redop = 8; }), DecodeError::bad_redop);
  // Bitwise ops on a float dtype: no rank issues them.
  EXPECT_EQ(mutated([](WireHeader& h) {
              h.redop = static_cast<std::uint8_t>(ReduceOp::bxor);
              h.dtype = static_cast<std::uint8_t>(DataType::f32);
            }),
            DecodeError::bad_redop);
  EXPECT_EQ(mutated([](WireHeader& h) { h.payload_len += 1; }), DecodeError::bad_length);
  EXPECT_EQ(mutated([](WireHeader& h) { h.payload_len -= 1; }), DecodeError::bad_length);
  EXPECT_EQ(mutated([](WireHeader& h) { h.payload_len = 0xffffffffu; }), DecodeError::bad_length);
  // The buffer is longer or shorter than the header says.
  EXPECT_EQ(proto::decode(ok.data(), ok.size - 1, kProcs, &v), DecodeError::bad_length);
  RawMessage longer = ok;
  longer.words.push_back(0);
  EXPECT_EQ(proto::decode(longer.data(), ok.size + 8, kProcs, &v), DecodeError::bad_length);
  EXPECT_EQ(proto::decode(ok.data(), 64, kProcs, &v), DecodeError::bad_length);
  // nblocks * 8 beyond the payload.
  EXPECT_EQ(mutated([](WireHeader& h) { h.nblocks = 6; }), DecodeError::bad_length);
  EXPECT_EQ(mutated([](WireHeader& h) { h.nblocks = 0xffff; }), DecodeError::bad_length);
  // nblocks smaller than the payload carries: the lengths no longer add up.
  EXPECT_EQ(mutated([](WireHeader& h) { h.nblocks = 1; }), DecodeError::bad_length);
}

TEST(ProtoCodec, RejectsBadSenderAndGeometry) {
  const Geometry g = geom(10, 4, 2);
  const RawMessage ok = blocks_message(MsgType::window, g, 1, 3, {1}, kEnd);
  ASSERT_EQ(decode(ok), DecodeError::none);
  EXPECT_EQ(decode(ok, nullptr, 3), DecodeError::bad_sender);
  EXPECT_EQ(decode(ok, nullptr, 0), DecodeError::bad_sender);
  auto mutated = [&](auto f) {
    RawMessage m = ok;
    f(m.header());
    return decode(m);
  };
  EXPECT_EQ(mutated([](WireHeader& h) { h.sender = kProcs; }), DecodeError::bad_sender);
  EXPECT_EQ(mutated([](WireHeader& h) { h.sender = 0xffffffffu; }), DecodeError::bad_sender);
  EXPECT_EQ(mutated([](WireHeader& h) { h.lane = 2; }), DecodeError::bad_geometry);
  EXPECT_EQ(mutated([](WireHeader& h) { h.lane = 0xffffffffu; }), DecodeError::bad_geometry);
  EXPECT_EQ(mutated([](WireHeader& h) { h.num_lanes = 0; }), DecodeError::bad_geometry);
  EXPECT_EQ(mutated([](WireHeader& h) { h.block_elems = 0; }), DecodeError::bad_geometry);
  EXPECT_EQ(mutated([](WireHeader& h) { h.block_elems = (1u << 20) + 1; }), DecodeError::bad_geometry);
  EXPECT_EQ(mutated([](WireHeader& h) { h.count = (std::uint64_t{1} << 56) + 1; }), DecodeError::bad_geometry);
  EXPECT_EQ(mutated([](WireHeader& h) { h.count = ~std::uint64_t{0}; }), DecodeError::bad_geometry);
  // Geometry errors also refuse error/abort messages.
  RawMessage err = reason_message(MsgType::error, g, 0, 0, "x");
  err.header().block_elems = 0;
  EXPECT_EQ(decode(err), DecodeError::bad_geometry);
  // The limits themselves are accepted.
  const std::uint64_t max_count = std::uint64_t{1} << 56;
  const Geometry big = geom(max_count, 1u << 20, 3);
  const std::uint64_t last = big.nblocks() - 1;  // 2^36 - 1, in lane last % 3
  RawMessage edge = blocks_message(MsgType::window, geom(max_count, 1, 1), 0, 0, {}, kEnd);
  EXPECT_EQ(decode(edge), DecodeError::none);
  WireHeader h = proto::make_header(MsgType::window, big, ReduceOp::sum, 0, 0, static_cast<std::uint32_t>(last % 3), 0);
  h.next_index = last;
  EXPECT_EQ(decode(build_message(h, {}, nullptr, 0)), DecodeError::none);
  h.next_index = last + 3;
  EXPECT_EQ(decode(build_message(h, {}, nullptr, 0)), DecodeError::bad_next);
}

TEST(ProtoCodec, RejectsBadIndices) {
  const Geometry g = geom(40, 4, 3);  // 10 blocks; lane 1 = {1, 4, 7}
  const std::size_t block = 16;
  auto win = [&](std::vector<std::uint64_t> idx, std::uint64_t next = kEnd, std::uint32_t lane = 1) {
    WireHeader h = proto::make_header(MsgType::window, g, ReduceOp::sum, 0, 0, lane, 0);
    h.next_index = next;
    std::vector<std::byte> data(idx.size() * block, std::byte{1});
    return decode(build_message(h, idx, data.data(), data.size()));
  };
  EXPECT_EQ(win({1, 4, 7}), DecodeError::none);
  EXPECT_EQ(win({10}), DecodeError::bad_index);        // == nblocks (and in lane 1)
  EXPECT_EQ(win({13}), DecodeError::bad_index);        // beyond the tensor, in lane 1
  EXPECT_EQ(win({~std::uint64_t{0} - 1}), DecodeError::bad_index);
  EXPECT_EQ(win({2}), DecodeError::bad_index);         // lane 2
  EXPECT_EQ(win({0}), DecodeError::bad_index);         // lane 0
  EXPECT_EQ(win({1, 5}), DecodeError::bad_index);      // second not in the lane
  EXPECT_EQ(win({4, 1}), DecodeError::bad_index);      // decreasing
  EXPECT_EQ(win({4, 4}), DecodeError::bad_index);      // repeated
  EXPECT_EQ(win({1, 7, 4}), DecodeError::bad_index);
  // next pointer
  EXPECT_EQ(win({1}, 4), DecodeError::none);
  EXPECT_EQ(win({1}, 7), DecodeError::none);
  EXPECT_EQ(win({1}, 5), DecodeError::bad_next);       // not in the lane
  EXPECT_EQ(win({4}, 1), DecodeError::bad_next);       // before the last block
  EXPECT_EQ(win({4}, 4), DecodeError::bad_next);       // equal to the last block
  EXPECT_EQ(win({1}, 10), DecodeError::bad_next);      // == nblocks
  EXPECT_EQ(win({1}, 13), DecodeError::bad_next);      // beyond the tensor, in lane 1
  EXPECT_EQ(win({}, 2, 1), DecodeError::bad_next);     // empty window, next in another lane
  // The same rules apply to the next pointer of a final result, not to a non-final chunk.
  auto res = [&](std::vector<std::uint64_t> idx, std::uint64_t next, bool final) {
    WireHeader h = proto::make_header(MsgType::result, g, ReduceOp::sum, 0, 0, 1, 0);
    h.next_index = next;
    h.flags = final ? std::uint32_t{proto::kFlagFinal} : 0u;
    std::vector<std::byte> data(idx.size() * block, std::byte{1});
    return decode(build_message(h, idx, data.data(), data.size()));
  };
  EXPECT_EQ(res({4}, 1, true), DecodeError::bad_next);
  EXPECT_EQ(res({4}, 5, true), DecodeError::bad_next);
  EXPECT_EQ(res({4}, 7, true), DecodeError::none);
  EXPECT_EQ(res({4}, 1, false), DecodeError::none);
  EXPECT_EQ(res({4, 1}, kEnd, false), DecodeError::bad_index);
}

TEST(ProtoCodec, TailBlockLengthRule) {
  for (DataType dt : {DataType::f32, DataType::f16, DataType::bf16, DataType::i32}) {
    const std::size_t es = dtype_size(dt);
    const Geometry g = geom(10, 4, 1, dt);  // block 2 has 2 elements
    WireHeader h = proto::make_header(MsgType::window, g, ReduceOp::sum, 0, 0, 0, 0);
    std::vector<std::byte> data(3 * 4 * es, std::byte{1});
    EXPECT_EQ(decode(build_message(h, {2}, data.data(), 2 * es)), DecodeError::none) << dtype_name(dt);
    EXPECT_EQ(decode(build_message(h, {2}, data.data(), 4 * es)), DecodeError::bad_length) << dtype_name(dt);
    EXPECT_EQ(decode(build_message(h, {2}, data.data(), 1 * es)), DecodeError::bad_length) << dtype_name(dt);
    EXPECT_EQ(decode(build_message(h, {1}, data.data(), 4 * es)), DecodeError::none) << dtype_name(dt);
    EXPECT_EQ(decode(build_message(h, {1}, data.data(), 2 * es)), DecodeError::bad_length) << dtype_name(dt);
    EXPECT_EQ(decode(build_message(h, {0, 1, 2}, data.data(), 10 * es)), DecodeError::none) << dtype_name(dt);
    EXPECT_EQ(decode(build_message(h, {0, 1, 2}, data.data(), 12 * es)), DecodeError::bad_length) << dtype_name(dt);
    // A count that is a multiple of the block size has no short block.
    const Geometry even = geom(12, 4, 1, dt);
    WireHeader e = proto::make_header(MsgType::window, even, ReduceOp::sum, 0, 0, 0, 0);
    EXPECT_EQ(decode(build_message(e, {2}, data.data(), 4 * es)), DecodeError::none) << dtype_name(dt);
    EXPECT_EQ(decode(build_message(e, {2}, data.data(), 2 * es)), DecodeError::bad_length) << dtype_name(dt);
    std::vector<std::uint64_t> idx{0, 2};
    EXPECT_EQ(proto::payload_bytes(g, idx.data(), 2), 16 + 6 * es);
  }
}

TEST(ProtoCodec, LocalDataMessagesCarryIndicesOnly) {
  const Geometry g = geom(10, 4, 2);
  for (MsgType t : {MsgType::window, MsgType::result}) {
    WireHeader h = proto::make_header(t, g, ReduceOp::sum, 0, 0, 0, 0);
    h.flags = proto::kFlagLocalData | (t == MsgType::result ? std::uint32_t{proto::kFlagFinal} : 0u);
    std::vector<std::byte> data(24, std::byte{1});
    MessageView v;
    const RawMessage idx_only = build_message(h, {0, 2}, nullptr, 0);
    ASSERT_EQ(decode(idx_only, &v), DecodeError::none);
    EXPECT_EQ(v.blocks, idx_only.data() + idx_only.size);
    EXPECT_EQ(decode(build_message(h, {0, 2}, data.data(), 24)), DecodeError::bad_length);
    EXPECT_EQ(decode(build_message(h, {0, 3}, nullptr, 0)), DecodeError::bad_index);
  }
}

TEST(ProtoCodec, DescribeNamesEveryError) {
  for (int e = 0; e <= static_cast<int>(DecodeError::bad_sender); ++e) {
    const std::string text = proto::describe(static_cast<DecodeError>(e));
    EXPECT_FALSE(text.empty());
    EXPECT_NE(text, "unknown decode error") << e;
  }
}

// ---------------------------------------------------------------------------------------------
// Mutation fuzz

// Checks every promise decode() makes about an accepted message; touches every byte it points at
// (so valgrind / ASan notice a view outside the buffer).
void check_accepted(const std::byte* data, std::size_t size, std::uint32_t nprocs, const MessageView& v,
                    std::uint64_t* sink) {
  ASSERT_GE(size, sizeof(WireHeader));
  ASSERT_EQ(reinterpret_cast<const std::byte*>(v.header), data);
  const WireHeader& h = *v.header;
  ASSERT_EQ(h.magic, proto::kMagic);
  ASSERT_EQ(h.payload_len, size - sizeof(WireHeader));
  ASSERT_LT(h.sender, nprocs);
  ASSERT_GT(h.block_elems, 0u);
  ASSERT_LT(h.lane, h.num_lanes);
  ASSERT_LE(h.count, std::uint64_t{1} << 56);
  ASSERT_EQ(v.geometry.count, h.count);
  ASSERT_EQ(v.geometry.block_elems, h.block_elems);
  ASSERT_EQ(v.geometry.num_lanes, h.num_lanes);
  ASSERT_EQ(static_cast<std::uint8_t>(v.geometry.dtype), h.dtype);
  const auto type = static_cast<MsgType>(h.type);
  if (type == MsgType::error || type == MsgType::abort) {
    ASSERT_EQ(h.nblocks, 0u);
    ASSERT_EQ(reinterpret_cast<const std::byte*>(v.reason), data + sizeof(WireHeader));
    ASSERT_EQ(v.reason_len, h.payload_len);
    ASSERT_LE(v.reason_len, proto::kMaxReasonBytes);
    for (std::uint32_t i = 0; i < v.reason_len; ++i) *sink += static_cast<unsigned char>(v.reason[i]);
    return;
  }
  ASSERT_TRUE(type == MsgType::window || type == MsgType::result);
  const std::uint64_t nb = v.geometry.nblocks();
  ASSERT_EQ(reinterpret_cast<const std::byte*>(v.indices), data + sizeof(WireHeader));
  ASSERT_EQ(v.blocks, data + sizeof(WireHeader) + 8 * std::size_t{h.nblocks});
  std::uint64_t bytes = 8 * std::uint64_t{h.nblocks};
  for (std::uint32_t i = 0; i < h.nblocks; ++i) {
    ASSERT_LT(v.indices[i], nb);
    ASSERT_EQ(v.indices[i] % h.num_lanes, h.lane);
    if (i) {
      ASSERT_GT(v.indices[i], v.indices[i - 1]);
    }
    if (!(h.flags & proto::kFlagLocalData)) bytes += v.geometry.block_bytes_at(v.indices[i]);  // local: indices only
  }
  ASSERT_EQ(bytes, h.payload_len);
  const std::byte* end = data + size;
  ASSERT_LE(v.blocks, end);
  for (const std::byte* p = v.blocks; p < end; ++p) *sink += std::to_integer<unsigned>(*p);
  if ((type == MsgType::window || (h.flags & proto::kFlagFinal)) && h.next_index != kEnd) {
    ASSERT_LT(h.next_index, nb);
    ASSERT_EQ(h.next_index % h.num_lanes, h.lane);
    if (h.nblocks) {
      ASSERT_GT(h.next_index, v.indices[h.nblocks - 1]);
    }
  }
}

std::vector<RawMessage> fuzz_seeds() {
  std::vector<RawMessage> seeds;
  seeds.push_back(blocks_message(MsgType::window, geom(10, 4, 2), 0, 1, {0, 2}, kEnd));
  seeds.push_back(blocks_message(MsgType::window, geom(100, 1, 3), 1, 0, {1, 4, 7}, 10));
  seeds.push_back(blocks_message(MsgType::window, geom(37, 8, 1, DataType::f16), 0, 3, {0, 1, 4}, kEnd));
  seeds.push_back(blocks_message(MsgType::window, geom(0, 4, 5), 4, 2, {}, kEnd));
  seeds.push_back(blocks_message(MsgType::result, geom(50, 4, 2, DataType::bf16), 0, 1, {0, 2, 12}, kEnd));
  seeds.push_back(blocks_message(MsgType::result, geom(50, 4, 2, DataType::i32), 0, 1, {0, 2}, 6));
  seeds.push_back(blocks_message(MsgType::result, geom(50, 4, 2), 0, 1, {4, 6, 8, 10}, 3, false));
  seeds.push_back(blocks_message(MsgType::result, geom(std::uint64_t{1} << 40, 2, 7), 3, 2, {3, 10}, 24));
  {
    WireHeader h = proto::make_header(MsgType::window, geom(100, 4, 3), ReduceOp::sum, 9, 3, 1, 0);
    h.flags = proto::kFlagLocalData;
    h.next_index = 10;
    seeds.push_back(build_message(h, {1, 4, 7}, nullptr, 0));
  }
  seeds.push_back(reason_message(MsgType::error, geom(10, 4, 2), 1, 3, "rank 2 passed 11 x f32 sum"));
  seeds.push_back(reason_message(MsgType::abort, geom(0, 4, 2), 0, 0, std::string(200, 'r')));
  seeds.push_back(reason_message(MsgType::error, geom(10, 4, 2), 1, 3, std::string(proto::kMaxReasonBytes, 'e')));
  return seeds;
}

TEST(ProtoCodec, MutationFuzzNeverAcceptsInconsistentMessages) {
  std::mt19937_64 rng(20240611);
  const std::vector<RawMessage> seeds = fuzz_seeds();
  for (const RawMessage& s : seeds) ASSERT_EQ(decode(s), DecodeError::none);
  std::uint64_t sink = 0, accepted = 0;
  std::vector<std::uint64_t> by_error(16, 0);
  const int kIterations = 200000;
  for (int it = 0; it < kIterations; ++it) {
    const RawMessage& seed = seeds[rng() % seeds.size()];
    std::vector<std::byte> bytes(seed.data(), seed.data() + seed.size);
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      switch (rng() % 8) {
        case 0:
        case 1:  // flip bits of a header byte
          if (!bytes.empty()) bytes[rng() % std::min<std::size_t>(bytes.size(), 64)] ^= static_cast<std::byte>(1u << (rng() % 8));
          break;
        case 2:  // random byte anywhere
          if (!bytes.empty()) bytes[rng() % bytes.size()] = static_cast<std::byte>(rng());
          break;
        case 3: {  // a header field set to an edge value
          static const std::uint64_t edge[] = {0, 1, 2, 3, 4, 5, 63, 64, 255, 1024, 1025, 65535, 0xffffffffull,
                                               std::uint64_t{1} << 56, (std::uint64_t{1} << 56) + 1, ~0ull, ~0ull - 1};
          const std::uint64_t val = edge[rng() % (sizeof edge / sizeof edge[0])];
          static const std::pair<int, int> fields[] = {{0, 2}, {2, 1}, {3, 1}, {4, 1}, {5, 1}, {6, 2}, {16, 4},
                                                       {20, 4}, {24, 8}, {32, 8}, {40, 4}, {44, 4}, {48, 4}, {56, 4}};
          const auto [off, len] = fields[rng() % (sizeof fields / sizeof fields[0])];
          if (bytes.size() >= static_cast<std::size_t>(off + len)) std::memcpy(bytes.data() + off, &val, static_cast<std::size_t>(len));
          break;
        }
        case 4:  // truncate
          bytes.resize(rng() % (bytes.size() + 1));
          break;
        case 5: {  // extend
          const std::size_t extra = 1 + rng() % 40;
          for (std::size_t i = 0; i < extra; ++i) bytes.push_back(static_cast<std::byte>(rng()));
          break;
        }
        case 6: {  // keep the header consistent with the new length, to get past the length check
          if (bytes.size() >= 64) {
            const auto len = static_cast<std::uint32_t>(bytes.size() - 64);
            std::memcpy(bytes.data() + 44, &len, 4);
          }
          break;
        }
        case 7: {  // rewrite an index slot
          if (bytes.size() >= 72) {
            const std::size_t slots = (bytes.size() - 64) / 8;
            const std::uint64_t val = rng() % 2 ? rng() % 64 : rng();
            std::memcpy(bytes.data() + 64 + 8 * (rng() % slots), &val, 8);
          }
          break;
        }
      }
    }
    // An exact-size heap copy, so any read past the end is a heap overflow the tools see.
    const std::size_t size = bytes.size();
    std::unique_ptr<std::byte[]> exact(new std::byte[size == 0 ? 1 : size]);
    if (size) std::memcpy(exact.get(), bytes.data(), size);
    const std::uint32_t nprocs = 1 + static_cast<std::uint32_t>(rng() % 5);
    MessageView v;
    const DecodeError e = proto::decode(exact.get(), size, nprocs, &v);
    ++by_error[static_cast<std::size_t>(e)];
    if (e == DecodeError::none) {
      ++accepted;
      check_accepted(exact.get(), size, nprocs, v, &sink);
      if (::testing::Test::HasFatalFailure()) {
        ADD_FAILURE() << "iteration " << it;
        return;
      }
    }
  }
  // The fuzz reaches acceptance and most refusal reasons.
  EXPECT_GT(accepted, 1000u);
  for (DecodeError e : {DecodeError::too_short, DecodeError::bad_magic, DecodeError::bad_version, DecodeError::bad_type,
                        DecodeError::bad_length, DecodeError::bad_geometry, DecodeError::bad_index,
                        DecodeError::bad_sender})
    EXPECT_GT(by_error[static_cast<std::size_t>(e)], 0u) << proto::describe(e);
  EXPECT_NE(sink, 1u);  // keep the reads
}

}  // namespace
}  // namespace sparcoll::testing
