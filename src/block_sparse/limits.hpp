// Message-size arithmetic shared by workers and aggregators, so both ends agree.
#pragma once

#include <algorithm>
#include <cstdint>

#include "proto/wire.hpp"
#include "runtime/op_slots.hpp"

namespace sparcoll::block_sparse {

using runtime::op_slot_count;

// Blocks a worker fuses into one window message. Sized for 4-byte elements whatever the op's
// dtype, so aggregators can size their staging once for every op.
inline std::uint32_t window_capacity(std::uint32_t fusion, std::uint32_t block_elems, std::uint32_t max_message) {
  const std::uint64_t per_block = 8 + std::uint64_t{block_elems} * 4;
  const std::uint64_t fit = (max_message - sizeof(proto::WireHeader)) / per_block;
  return static_cast<std::uint32_t>(std::max<std::uint64_t>(1, std::min<std::uint64_t>(fusion, fit)));
}

// Blocks of one result message (a round's result is split into several when larger).
inline std::uint32_t result_chunk_capacity(std::uint32_t block_elems, std::uint32_t elem_size, std::uint32_t max_message) {
  const std::uint64_t per_block = 8 + std::uint64_t{block_elems} * elem_size;
  const std::uint64_t fit = (max_message - sizeof(proto::WireHeader)) / per_block;
  return static_cast<std::uint32_t>(std::max<std::uint64_t>(1, std::min<std::uint64_t>(fit, 65535)));
}

// The smallest max_message that carries one block of 4-byte elements.
inline std::uint64_t min_message_for(std::uint32_t block_elems) {
  return sizeof(proto::WireHeader) + 8 + std::uint64_t{block_elems} * 4;
}

}  // namespace sparcoll::block_sparse
