#include "algo/sparse_vector.hpp"

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstring>

#include "block/bitmap.hpp"
#include "block/convert.hpp"
#include "block/reduce.hpp"

namespace sparcoll::algo {

namespace {

// Leading items of idx[0, n) below `bound` (a prefix, since idx is sorted).
std::size_t run_below(const std::uint32_t* idx, std::size_t n, std::uint32_t bound) noexcept {
  std::size_t k = 0;
  // Most runs in random supports are short: look at a few items before going wide.
  for (; k < n && k < 4; ++k)
    if (idx[k] >= bound) return k;
#if defined(__AVX2__)
  // Unsigned compare as signed after flipping the sign bit.
  const __m256i flip = _mm256_set1_epi32(static_cast<int>(0x80000000u));
  const __m256i b = _mm256_set1_epi32(static_cast<int>(bound ^ 0x80000000u));
  for (; k + 8 <= n; k += 8) {
    const __m256i v = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(idx + k)), flip);
    const auto below = static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(b, v))));
    if (below != 0xffu) return k + static_cast<std::size_t>(std::countr_one(below));
  }
#endif
  while (k < n && idx[k] < bound) ++k;
  return k;
}

// Leading positions where a and b hold the same index (identical supports: long runs).
std::size_t run_equal(const std::uint32_t* a, const std::uint32_t* b, std::size_t n) noexcept {
  std::size_t k = 0;
  for (; k < n && k < 4; ++k)
    if (a[k] != b[k]) return k;
#if defined(__AVX2__)
  for (; k + 8 <= n; k += 8) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + k));
    const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + k));
    const auto eq = static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(x, y))));
    if (eq != 0xffu) return k + static_cast<std::size_t>(std::countr_one(eq));
  }
#endif
  while (k < n && a[k] == b[k]) ++k;
  return k;
}

const std::uint32_t* words(const void* p) { return static_cast<const std::uint32_t*>(p); }

// Copies n items of one side; for min/max the other side's implicit 0 takes part.
void copy_run(const std::uint32_t* idx, const std::uint32_t* val, std::size_t n, DataType acc_type, ReduceOp op,
              std::uint32_t* out_idx, std::uint32_t* out_val) {
  std::memcpy(out_idx, idx, n * 4);
  std::memcpy(out_val, val, n * 4);
  block::acc_reduce_zero(acc_type, op, out_val, n);  // no-op for sum and avg
}

void put_header(std::vector<std::byte>* out, std::uint8_t flags, DataType value_type, std::uint64_t begin,
                std::uint64_t end, std::uint64_t count) {
  const SparseWireHeader h{kSparseMagic, flags, static_cast<std::uint8_t>(value_type), 0, begin, end, count};
  std::memcpy(out->data(), &h, sizeof h);
}

}  // namespace

void merge(SparseSpan a, SparseSpan b, DataType acc_type, ReduceOp op, SparseVector* out) {
  out->resize(a.n + b.n);
  std::uint32_t* oi = out->idx.data();
  std::uint32_t* ov = out->val.data();
  const std::uint32_t *ai = a.idx, *bi = b.idx, *av = words(a.val), *bv = words(b.val);
  const bool additive = op == ReduceOp::sum || op == ReduceOp::avg;
  std::size_t i = 0, j = 0, o = 0;
  while (i < a.n && j < b.n) {
    if (ai[i] < bi[j]) {
      const std::size_t k = run_below(ai + i, a.n - i, bi[j]);
      copy_run(ai + i, av + i, k, acc_type, op, oi + o, ov + o);
      i += k, o += k;
    } else if (bi[j] < ai[i]) {
      const std::size_t k = run_below(bi + j, b.n - j, ai[i]);
      copy_run(bi + j, bv + j, k, acc_type, op, oi + o, ov + o);
      j += k, o += k;
    } else {
      const std::size_t k = run_equal(ai + i, bi + j, std::min(a.n - i, b.n - j));
      std::memcpy(oi + o, ai + i, k * 4);
      if (additive && k < 8) {
        // Short runs inline: the same IEEE add (or wrapping int add) the kernels do.
        for (std::size_t t = 0; t < k; ++t) {
          if (acc_type == DataType::i32) {
            ov[o + t] = av[i + t] + bv[j + t];
          } else {
            float x, y;
            std::memcpy(&x, av + i + t, 4);
            std::memcpy(&y, bv + j + t, 4);
            x += y;
            std::memcpy(ov + o + t, &x, 4);
          }
        }
      } else {
        std::memcpy(ov + o, av + i, k * 4);
        block::acc_reduce(acc_type, op, bv + j, ov + o, k);  // out = op(a, b)
      }
      i += k, j += k, o += k;
    }
  }
  if (i < a.n) copy_run(ai + i, av + i, a.n - i, acc_type, op, oi + o, ov + o), o += a.n - i;
  if (j < b.n) copy_run(bi + j, bv + j, b.n - j, acc_type, op, oi + o, ov + o), o += b.n - j;
  out->resize(o);
}

void dense_to_sparse(const void* dense, std::size_t begin, std::size_t end, DataType dtype, SparseVector* out,
                     std::vector<std::uint64_t>* bits) {
  constexpr std::uint32_t kBlock = 256;  // one scan bit per 256 elements, as block-sparse uses
  const std::size_t esize = dtype_size(dtype);
  const auto* base = static_cast<const std::byte*>(dense) + begin * esize;
  const std::size_t len = end - begin;
  const std::size_t nblocks = block::block_count(len, kBlock);
  bits->resize(block::bitmap_words(nblocks) + 1);
  const std::size_t nonzero = len == 0 ? 0 : block::scan_nonzero_blocks(base, len, dtype, kBlock, bits->data());
  // Room for every element of every non-zero block; trimmed at the end.
  out->resize(nonzero * kBlock);
  std::uint32_t* oi = out->idx.data();
  std::uint32_t* ov = out->val.data();
  std::size_t o = 0;
  float wide[kBlock];
  for (std::size_t w = 0; w < block::bitmap_words(nblocks); ++w)
    for (std::uint64_t set = (*bits)[w]; set != 0; set &= set - 1) {
      const std::size_t blk = w * 64 + static_cast<std::size_t>(std::countr_zero(set));
      const std::size_t first = blk * kBlock, n = std::min<std::size_t>(kBlock, len - first);
      const std::uint32_t* src;
      std::uint32_t mask = 0xffffffffu;  // which bits make an element non-zero (floats: not the sign)
      if (dtype == DataType::f16 || dtype == DataType::bf16) {
        block::acc_load(dtype, base + first * esize, wide, n);
        src = reinterpret_cast<const std::uint32_t*>(wide);
        mask = 0x7fffffffu;
      } else {
        src = reinterpret_cast<const std::uint32_t*>(base + first * esize);
        if (dtype == DataType::f32) mask = 0x7fffffffu;
      }
      const auto g = static_cast<std::uint32_t>(begin + first);
      // Branch-free compaction: always write, advance only past non-zeros.
      for (std::size_t k = 0; k < n; ++k) {
        oi[o] = g + static_cast<std::uint32_t>(k);
        ov[o] = src[k];
        o += (src[k] & mask) != 0;
      }
    }
  out->resize(o);
}

std::size_t lower_bound(SparseSpan v, std::uint64_t bound) noexcept {
  if (bound > 0xffffffffull) return v.n;
  return static_cast<std::size_t>(std::lower_bound(v.idx, v.idx + v.n, static_cast<std::uint32_t>(bound)) - v.idx);
}

void encode_sparse_acc(SparseSpan v, std::uint64_t begin, std::uint64_t end, DataType acc_type,
                       std::vector<std::byte>* out) {
  out->resize(sizeof(SparseWireHeader) + v.n * 8);
  put_header(out, 0, acc_type, begin, end, v.n);
  std::byte* p = out->data() + sizeof(SparseWireHeader);
  if (v.n == 0) return;
  std::memcpy(p, v.idx, v.n * 4);
  std::memcpy(p + v.n * 4, v.val, v.n * 4);
}

void encode_sparse_final(SparseSpan v, std::uint64_t begin, std::uint64_t end, DataType dtype, ReduceOp op,
                         std::uint32_t nranks, std::vector<std::byte>* out) {
  out->resize(sizeof(SparseWireHeader) + v.n * (4 + dtype_size(dtype)));
  put_header(out, 0, dtype, begin, end, v.n);
  std::byte* p = out->data() + sizeof(SparseWireHeader);
  if (v.n == 0) return;
  std::memcpy(p, v.idx, v.n * 4);
  block::acc_store(dtype, op, v.val, v.n, nranks, p + v.n * 4);
}

void encode_dense_final(const void* acc, std::uint64_t begin, std::uint64_t end, DataType dtype, ReduceOp op,
                        std::uint32_t nranks, std::vector<std::byte>* out) {
  const std::size_t len = end - begin;
  out->resize(sizeof(SparseWireHeader) + len * dtype_size(dtype));
  put_header(out, kSparseDense, dtype, begin, end, len);
  block::acc_store(dtype, op, acc, len, nranks, out->data() + sizeof(SparseWireHeader));
}

std::string decode(const std::byte* data, std::size_t bytes, std::uint64_t begin, std::uint64_t end,
                   DataType value_type, SparseMessage* out, bool* range_differs) {
  *range_differs = false;
  SparseWireHeader h;
  if (bytes < sizeof h)
    return "a " + std::to_string(bytes) + "-byte sparse vector, shorter than its 32-byte header";
  std::memcpy(&h, data, sizeof h);
  if (h.magic != kSparseMagic || h.reserved != 0 || (h.flags & ~kSparseDense) != 0)
    return "a sparse vector with a bad header (magic 0x" + [&] {
      char b[16];
      std::snprintf(b, sizeof b, "%08x", h.magic);
      return std::string(b);
    }() + ", flags " + std::to_string(h.flags) + ")";
  if (h.value_type != static_cast<std::uint8_t>(value_type))
    return "values of type " + std::to_string(h.value_type) + " where " + std::string(dtype_name(value_type)) +
           " was expected (dtype differs across ranks?)";
  if (h.begin != begin || h.end != end) {
    *range_differs = true;
    return "indices [" + std::to_string(h.begin) + ", " + std::to_string(h.end) + ") where this rank expects [" +
           std::to_string(begin) + ", " + std::to_string(end) + ") (dim differs across ranks?)";
  }
  const bool dense = (h.flags & kSparseDense) != 0;
  const std::uint64_t len = end - begin, vsize = dtype_size(value_type);
  if (h.count > len || (dense && h.count != len))
    return std::to_string(h.count) + " items for a range of " + std::to_string(len) + " indices";
  const std::uint64_t want = sizeof h + h.count * (dense ? vsize : 4 + vsize);
  if (bytes != want)
    return "a sparse vector of " + std::to_string(bytes) + " bytes where its header announces " + std::to_string(want);
  out->dense = dense;
  out->begin = begin;
  out->end = end;
  out->count = h.count;
  const std::byte* p = data + sizeof h;
  out->idx = dense ? nullptr : reinterpret_cast<const std::uint32_t*>(p);
  out->values = dense ? p : p + h.count * 4;
  if (!dense) {
    // Indices strictly increasing inside the range: the merge relies on it.
    std::uint64_t prev = begin;
    for (std::uint64_t k = 0; k < h.count; ++k) {
      const std::uint64_t x = out->idx[k];
      if (x < prev || x >= end || (k > 0 && x == prev))
        return "index " + std::to_string(x) + " at position " + std::to_string(k) +
               " out of order or outside [" + std::to_string(begin) + ", " + std::to_string(end) + ")";
      prev = x;
    }
  }
  return std::string();
}

void write_dense(const SparseMessage& m, DataType dtype, void* dense) {
  const std::size_t esize = dtype_size(dtype);
  auto* base = static_cast<std::byte*>(dense) + m.begin * esize;
  const std::size_t len = m.end - m.begin;
  if (m.dense) {
    if (len) std::memcpy(base, m.values, len * esize);
    return;
  }
  if (len) std::memset(base, 0, len * esize);
  if (esize == 4) {
    for (std::uint64_t k = 0; k < m.count; ++k) std::memcpy(base + (m.idx[k] - m.begin) * 4, m.values + k * 4, 4);
  } else {
    for (std::uint64_t k = 0; k < m.count; ++k) std::memcpy(base + (m.idx[k] - m.begin) * 2, m.values + k * 2, 2);
  }
}

}  // namespace sparcoll::algo
