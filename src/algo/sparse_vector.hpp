// Index-value sparse vectors for the SparCML algorithms (ssar.cpp, dsar.cpp): the in-memory
// form, the merge-add of two of them, conversion from and to dense tensors, and the wire
// encoding (docs/algorithms.md, "SparCML: SSAR and DSAR").
//
// In memory a vector is a structure of arrays: u32 indices, sorted and unique, and one 4-byte
// accumulator per index (fp32 for f32/f16/bf16, int32 for i32; block/reduce.hpp). f16 and bf16
// are widened once when they enter and rounded once when the result leaves, like every other
// algorithm of the library, so partial sums never lose precision to the narrow type.
//
// An index that a vector does not hold stands for the value 0. That makes min and max well
// defined: merging applies op(x, 0) where only one side holds x, exactly what the dense
// algorithms do with a rank's zero element. A merge keeps every index either side holds, even
// when a sum cancels to 0, so the result's indices are the union of the inputs' indices.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sparcoll/types.hpp"

namespace sparcoll::algo {

struct SparseVector {
  std::vector<std::uint32_t> idx;
  std::vector<std::uint32_t> val;  // accumulator bits (float or int32), one per index

  std::size_t size() const noexcept { return idx.size(); }
  // Resizing keeps the capacity: after the first collectives nothing here allocates.
  void resize(std::size_t n) {
    idx.resize(n);
    val.resize(n);
  }
};

// A read-only view of sorted unique indices and their 4-byte accumulators (a SparseVector,
// a slice of one, or a decoded message).
struct SparseSpan {
  const std::uint32_t* idx = nullptr;
  const void* val = nullptr;  // n accumulators
  std::size_t n = 0;
};

inline SparseSpan span_of(const SparseVector& v) noexcept { return {v.idx.data(), v.val.data(), v.size()}; }
// Items [first, last) of v.
inline SparseSpan slice(const SparseVector& v, std::size_t first, std::size_t last) noexcept {
  return {v.idx.data() + first, v.val.data() + first, last - first};
}

// out = op(a, b) element by element over the union of indices, `a` always the left operand
// (the order matters for bitwise reproducibility, see ssar.cpp). acc_type is f32 or i32.
// Runs of equal indices are found eight at a time (AVX2) and reduced with the block kernels;
// runs held by one side only are copied whole. `out` must not alias a or b.
void merge(SparseSpan a, SparseSpan b, DataType acc_type, ReduceOp op, SparseVector* out);

// The non-zero elements of dense[begin, end) (dtype elements, global indices) as accumulators.
// Zero blocks are skipped with the block bitmap scan (block/bitmap.hpp); -0.0 counts as zero.
// `bits` is scratch for the bitmap. end must be <= 2^32.
void dense_to_sparse(const void* dense, std::size_t begin, std::size_t end, DataType dtype, SparseVector* out,
                     std::vector<std::uint64_t>* bits);

// Index of the first item of `v` whose index is >= bound (v's indices are sorted).
std::size_t lower_bound(SparseSpan v, std::uint64_t bound) noexcept;

// Breaks even when sending `nnz` (index, value) items costs as much as `len` values sent dense
// (SparCML's rule: nnz * (index bytes + value bytes) >= len * value bytes).
constexpr bool dense_is_cheaper(std::uint64_t nnz, std::uint64_t len, std::size_t value_bytes) noexcept {
  return nnz * (4 + value_bytes) >= len * value_bytes;
}

// --- wire encoding ---------------------------------------------------------------------------
// A message is a 32-byte header, then either `count` u32 indices followed by `count` values
// (sparse), or end - begin values (dense). Values are accumulators (partial results) or the
// user's dtype (final results), as `value_type` says. Little-endian, like the rest of the wire.
inline constexpr std::uint32_t kSparseMagic = 0x31565353;  // "SSV1"
inline constexpr std::uint8_t kSparseDense = 1;            // flags bit: values for every index of the range

struct SparseWireHeader {
  std::uint32_t magic;      // kSparseMagic
  std::uint8_t flags;       // kSparseDense or 0
  std::uint8_t value_type;  // DataType of the values
  std::uint16_t reserved;   // 0
  std::uint64_t begin;      // the index range [begin, end) the message covers
  std::uint64_t end;
  std::uint64_t count;      // items (dense: end - begin)
};
static_assert(sizeof(SparseWireHeader) == 32, "sparse message header layout is part of the wire format");

// The largest message a range of `len` indices can need (sparse with every index present).
constexpr std::size_t max_encoded_bytes(std::uint64_t len, std::size_t value_bytes) noexcept {
  return sizeof(SparseWireHeader) + len * (4 + value_bytes);
}

// Encodes v (global indices, all inside [begin, end)) with accumulator values, sparse.
void encode_sparse_acc(SparseSpan v, std::uint64_t begin, std::uint64_t end, DataType acc_type,
                       std::vector<std::byte>* out);
// Encodes v's final values: narrowed to dtype (avg: divided by nranks first), sparse.
void encode_sparse_final(SparseSpan v, std::uint64_t begin, std::uint64_t end, DataType dtype, ReduceOp op,
                         std::uint32_t nranks, std::vector<std::byte>* out);
// Encodes dense accumulators acc[0, end - begin) as final dtype values, dense.
void encode_dense_final(const void* acc, std::uint64_t begin, std::uint64_t end, DataType dtype, ReduceOp op,
                        std::uint32_t nranks, std::vector<std::byte>* out);

// A decoded message: views into the received bytes.
struct SparseMessage {
  bool dense = false;
  std::uint64_t begin = 0, end = 0, count = 0;
  const std::uint32_t* idx = nullptr;  // sparse only
  const std::byte* values = nullptr;   // count values of the expected type
};

// Checks a received message completely (size, header, value type, range, indices strictly
// increasing inside the range). Returns "" when it is fine, else what is wrong with it;
// *range_differs is set when the only problem is that the sender's range differs from ours
// (its dim differs: a usage mismatch, not a corrupt message).
std::string decode(const std::byte* data, std::size_t bytes, std::uint64_t begin, std::uint64_t end,
                   DataType value_type, SparseMessage* out, bool* range_differs);

// Writes a decoded final message into a dense dtype tensor `dense` (global indices): a dense
// message is copied, a sparse one zero-fills its range and scatters its values.
void write_dense(const SparseMessage& m, DataType dtype, void* dense);

}  // namespace sparcoll::algo
