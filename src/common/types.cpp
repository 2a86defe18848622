#include "sparcoll/types.hpp"
#include <iterator>

namespace sparcoll {

std::string_view dtype_name(DataType t) noexcept {
  switch (t) {
    case DataType::f32: return "f32";
    case DataType::f16: return "f16";
    case DataType::bf16: return "bf16";
    case DataType::i32: return "i32";
    case DataType::f64: return "f64";
    case DataType::i64: return "i64";
  }
  return "?";
}

std::string_view reduce_op_name(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::avg: return "avg";
    case ReduceOp::min: return "min";
    case ReduceOp::max: return "max";
    case ReduceOp::product: return "product";
    case ReduceOp::band: return "band";
    case ReduceOp::bor: return "bor";
    case ReduceOp::bxor: return "bxor";
  }
  return "?";
}

std::optional<DataType> parse_dtype(std::string_view s) noexcept {
  if (s == "f32" || s == "float32" || s == "float") return DataType::f32;
  if (s == "f16" || s == "float16" || s == "half") return DataType::f16;
  if (s == "bf16" || s == "bfloat16") return DataType::bf16;
  if (s == "i32" || s == "int32" || s == "int") return DataType::i32;
  if (s == "f64" || s == "float64" || s == "double") return DataType::f64;
  if (s == "i64" || s == "int64") return DataType::i64;
  return std::nullopt;
}

std::optional<ReduceOp> parse_reduce_op(std::string_view s) noexcept {
  if (s == "sum") return ReduceOp::sum;
  if (s == "avg" || s == "mean") return ReduceOp::avg;
  if (s == "min") return ReduceOp::min;
  if (s == "max") return ReduceOp::max;
  if (s == "product" || s == "prod") return ReduceOp::product;
  if (s == "band") return ReduceOp::band;
  if (s == "bor") return ReduceOp::bor;
  if (s == "bxor") return ReduceOp::bxor;
  return std::nullopt;
}

namespace {
// Names as SPARCOLL_ALGO spells them; index = the enum's value.
constexpr std::string_view kAlgorithmNames[] = {"default", "auto", "block_sparse", "ring", "butterfly",
                                                 "ssar_recursive_doubling", "ssar_split_allgather",
                                                 "dsar_split_allgather", "recursive_doubling", "direct", "hybrid",
                                                 "block_recursive_doubling"};
}  // namespace

std::string_view algorithm_name(Algorithm a) noexcept {
  const auto i = static_cast<std::size_t>(a);
  return i < std::size(kAlgorithmNames) ? kAlgorithmNames[i] : "?";
}

std::optional<Algorithm> parse_algorithm(std::string_view s) noexcept {
  for (std::size_t i = 1; i < std::size(kAlgorithmNames); ++i)
    if (s == kAlgorithmNames[i]) return static_cast<Algorithm>(i);
  return std::nullopt;
}

}  // namespace sparcoll
