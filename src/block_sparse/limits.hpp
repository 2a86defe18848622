// Message-size arithmetic shared by workers and aggregators, so both ends agree.
#pragma once

#include <algorithm>
#include <cstdint>

#include "proto/wire.hpp"

namespace sparcoll::block_sparse {

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

// Op slots per process: max_inflight rounded up to a power of two. Op ids are 32-bit and wrap;
// a power-of-two slot count divides 2^32, so consecutive ids keep mapping to consecutive slots
// across the wrap (and aggregators' 2x slots stay collision-free).
inline std::uint32_t op_slot_count(std::uint32_t max_inflight) {
  std::uint32_t n = 1;
  while (n < max_inflight) n <<= 1;
  return n;
}

// The smallest max_message that carries one block of 4-byte elements.
inline std::uint64_t min_message_for(std::uint32_t block_elems) {
  return sizeof(proto::WireHeader) + 8 + std::uint64_t{block_elems} * 4;
}

}  // namespace sparcoll::block_sparse
