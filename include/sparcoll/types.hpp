// Element types and reduction operators understood by every collective.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace sparcoll {

// Values are part of the C ABI and of the wire format: append only.
// f64 and i64 (64-bit): reduced on the dense algorithms of the collective thread only (ring,
// butterfly, recursive doubling, reduce, reduce_scatter); moved by every collective.
enum class DataType : std::uint8_t { f32 = 0, f16 = 1, bf16 = 2, i32 = 3, f64 = 4, i64 = 5 };
// product multiplies (i32 wraps modulo 2^32); like min, max and band, zero is not its neutral
// element, so a rank's zero blocks take part in it. band, bor, bxor: bitwise, i32 only.
enum class ReduceOp : std::uint8_t { sum = 0, avg = 1, min = 2, max = 3, product = 4, band = 5, bor = 6, bxor = 7 };

// How an allreduce runs (docs/algorithms.md). Values are part of the C ABI: append only.
enum class Algorithm : std::uint8_t {
  from_options = 0,             // Options::algo (SPARCOLL_ALGO)
  auto_select = 1,              // "auto": recursive_doubling up to Options::small_tensor_bytes, hybrid above
  block_sparse = 2,             // streaming block-sparse aggregation (OmniReduce)
  ring = 3,                     // dense ring: reduce-scatter + allgather
  butterfly = 4,                // dense recursive halving/doubling (Rabenseifner)
  ssar_recursive_doubling = 5,  // SparCML static sparse allreduce, recursive doubling
  ssar_split_allgather = 6,     // SparCML static sparse allreduce, split + allgather
  dsar_split_allgather = 7,     // SparCML dynamic sparse allreduce (densifies past break-even)
  recursive_doubling = 8,       // dense, latency-optimal: log2(n) exchanges of the whole tensor
  direct = 9,                   // dense reduce-scatter + allgather reading peers' memory in place (shm)
  hybrid = 10,                  // per stripe: block-sparse where sparse, the best dense path where dense
  block_recursive_doubling = 11,  // recursive doubling of the non-zero blocks (bitmap + blocks): small sparse tensors
};

constexpr std::size_t dtype_size(DataType t) noexcept {
  switch (t) {
    case DataType::f32: return 4;
    case DataType::f16: return 2;
    case DataType::bf16: return 2;
    case DataType::i32: return 4;
    case DataType::f64: return 8;
    case DataType::i64: return 8;
  }
  return 0;
}

constexpr bool dtype_valid(std::uint8_t raw) noexcept { return raw <= 5; }
// The 64-bit types, which block-sparse aggregation and the sparse algorithms do not take.
constexpr bool dtype_is_wide(DataType t) noexcept { return t == DataType::f64 || t == DataType::i64; }
constexpr bool reduce_op_valid(std::uint8_t raw) noexcept { return raw <= 7; }
// The bitwise ops take integer dtypes only.
constexpr bool reduce_op_is_bitwise(ReduceOp op) noexcept {
  return op == ReduceOp::band || op == ReduceOp::bor || op == ReduceOp::bxor;
}
// Whether op(x, 0) == x for every x: a rank's zero blocks can then be skipped.
constexpr bool zero_is_neutral(ReduceOp op) noexcept {
  return op == ReduceOp::sum || op == ReduceOp::avg || op == ReduceOp::bor || op == ReduceOp::bxor;
}

std::string_view dtype_name(DataType t) noexcept;
std::string_view reduce_op_name(ReduceOp op) noexcept;
std::optional<DataType> parse_dtype(std::string_view name) noexcept;     // "f32", "float32", ...
std::optional<ReduceOp> parse_reduce_op(std::string_view name) noexcept;  // "sum", "avg", "product", ...
std::string_view algorithm_name(Algorithm a) noexcept;                    // "ring", "auto", ...
std::optional<Algorithm> parse_algorithm(std::string_view name) noexcept;

}  // namespace sparcoll
