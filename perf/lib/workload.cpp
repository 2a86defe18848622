#include "workload.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

namespace sparcoll::perf {

namespace {

// Independent of the library's converters on purpose (F16C hardware rounding, plain bit ops).
float half_to_float(std::uint16_t h) { return _cvtsh_ss(h); }
std::uint16_t float_to_half(float f) { return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT); }
float bf16_to_float(std::uint16_t b) {
  std::uint32_t u = std::uint32_t{b} << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
std::uint16_t float_to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return static_cast<std::uint16_t>((u >> 16) | 0x40);
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<std::uint16_t>(u >> 16);
}

// The non-zero blocks of `rank` under the spec's pattern.
std::vector<std::uint64_t> chosen_blocks(const WorkloadSpec& spec, int rank) {
  const std::uint64_t nblocks = (spec.count + spec.block_elems - 1) / spec.block_elems;
  double density = spec.density;
  if (spec.pattern == Pattern::one_dense && rank == 0) density = 1.0;
  std::vector<std::uint64_t> candidates;
  if (spec.pattern == Pattern::dense_half) {
    // Every block of the first half; the density's share of the second half, at random.
    const std::uint64_t half = nblocks / 2;
    WorkloadSpec rest = spec;
    rest.pattern = Pattern::random;
    rest.count = (nblocks - half) * spec.block_elems;
    std::vector<std::uint64_t> chosen(half);
    std::iota(chosen.begin(), chosen.end(), std::uint64_t{0});
    for (std::uint64_t b : chosen_blocks(rest, rank))
      if (half + b < nblocks) chosen.push_back(half + b);
    return chosen;
  }
  if (spec.pattern == Pattern::disjoint) {
    for (std::uint64_t b = static_cast<std::uint64_t>(rank); b < nblocks; b += static_cast<std::uint64_t>(spec.world_size))
      candidates.push_back(b);
  } else {
    candidates.resize(nblocks);
    std::iota(candidates.begin(), candidates.end(), std::uint64_t{0});
  }
  const auto want = static_cast<std::uint64_t>(std::llround(density * static_cast<double>(nblocks)));
  const std::uint64_t k = std::min<std::uint64_t>(want, candidates.size());
  if (k == candidates.size()) return candidates;  // every candidate: already sorted, no draw needed
  const std::uint64_t salt = spec.pattern == Pattern::overlap ? 0xffff : static_cast<std::uint64_t>(rank);
  std::mt19937_64 rng(mix(spec.seed, salt));
  for (std::uint64_t i = 0; i < k; ++i) {  // partial Fisher-Yates
    std::uniform_int_distribution<std::uint64_t> pick(i, candidates.size() - 1);
    std::swap(candidates[i], candidates[pick(rng)]);
  }
  candidates.resize(k);
  std::sort(candidates.begin(), candidates.end());
  return candidates;
}

// The values of one chosen block: a counter-based stream keyed by (seed, rank, block), so any
// block of any rank is generated on its own (the reference regenerates only the chosen blocks).
// Values are +-(1..64) x 0.5 (f32, f16, bf16) or +-(1..64) x 1000003 (i32): exactly
// representable in every dtype, so sums stay exact in fp16/bf16, whatever the order of
// addition, and every element of a chosen block is non-zero.
template <typename Fn>
void block_values(const WorkloadSpec& spec, int rank, std::uint64_t block, Fn&& fn) {
  const std::size_t first = block * spec.block_elems;
  const std::size_t last = std::min<std::size_t>(spec.count, first + spec.block_elems);
  const std::uint64_t key = mix(mix(spec.seed ^ 0x5eed, static_cast<std::uint64_t>(rank) + 17), block);
  std::uint64_t bits = 0;
  for (std::size_t i = first, k = 0; i < last; ++i, ++k) {
    if ((k & 7) == 0) bits = mix(key, k >> 3);
    const int magnitude = static_cast<int>(bits & 63) + 1;
    const int v = (bits & 64) ? -magnitude : magnitude;
    bits >>= 8;
    fn(i, v);
  }
}

float value_as_float(DataType dtype, int v) {
  // The value a rank's element holds, read back as fp32 (what the library widens to).
  return dtype == DataType::i32 ? 0.0f : static_cast<float>(v) * 0.5f;
}

template <typename T>
T* as(std::vector<std::byte>& v) {
  return reinterpret_cast<T*>(v.data());
}
template <typename T>
const T* as(const std::vector<std::byte>& v) {
  return reinterpret_cast<const T*>(v.data());
}

}  // namespace

std::uint64_t mix(std::uint64_t seed, std::uint64_t salt) {
  std::uint64_t z = seed + 0x9e3779b97f4a7c15ull * (salt + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

bool parse_pattern(const std::string& name, Pattern* out) {
  if (name == "random") *out = Pattern::random;
  else if (name == "overlap") *out = Pattern::overlap;
  else if (name == "disjoint") *out = Pattern::disjoint;
  else if (name == "one_dense") *out = Pattern::one_dense;
  else if (name == "dense_half") *out = Pattern::dense_half;
  else return false;
  return true;
}

const char* pattern_name(Pattern p) {
  switch (p) {
    case Pattern::random: return "random";
    case Pattern::overlap: return "overlap";
    case Pattern::disjoint: return "disjoint";
    case Pattern::one_dense: return "one_dense";
    case Pattern::dense_half: return "dense_half";
  }
  return "?";
}

std::size_t nonzero_blocks(const WorkloadSpec& spec, int rank) { return chosen_blocks(spec, rank).size(); }

void generate(const WorkloadSpec& spec, int rank, std::vector<std::byte>* out) {
  const std::size_t esize = dtype_size(spec.dtype);
  out->assign(spec.count * esize, std::byte{0});
  for (std::uint64_t b : chosen_blocks(spec, rank)) {
    block_values(spec, rank, b, [&](std::size_t i, int v) {
      switch (spec.dtype) {
        case DataType::f32: as<float>(*out)[i] = static_cast<float>(v) * 0.5f; break;
        case DataType::f16: as<std::uint16_t>(*out)[i] = float_to_half(static_cast<float>(v) * 0.5f); break;
        case DataType::bf16: as<std::uint16_t>(*out)[i] = float_to_bf16(static_cast<float>(v) * 0.5f); break;
        case DataType::i32: as<std::int32_t>(*out)[i] = v * 1000003; break;
        case DataType::f64: as<double>(*out)[i] = static_cast<double>(v) * 0.5; break;
        case DataType::i64: as<std::int64_t>(*out)[i] = std::int64_t{v} * 1000003; break;
      }
    });
  }
}

void reference(const WorkloadSpec& spec, ReduceOp op, std::vector<std::byte>* out) {
  // Only the chosen blocks are visited: a rank whose block is zero adds +0 to a sum (no change)
  // and contributes 0 to a min or max, which is applied once per block at the end.
  const std::size_t n = spec.count;
  const bool is_int = spec.dtype == DataType::i32;
  const bool sum_like = op == ReduceOp::sum || op == ReduceOp::avg;
  const std::size_t nblocks = (n + spec.block_elems - 1) / spec.block_elems;
  std::vector<float> accf(is_int ? 0 : n, 0.0f);
  std::vector<std::uint32_t> acci(is_int ? n : 0, 0u);
  // i32 avg is exact (its sum is taken in 64 bits); i32 sum wraps modulo 2^32.
  std::vector<std::int64_t> acc_avg(is_int && op == ReduceOp::avg ? n : 0, 0);
  std::vector<std::uint32_t> present(sum_like ? 0 : nblocks, 0u);
  for (int r = 0; r < spec.world_size; ++r) {
    for (std::uint64_t b : chosen_blocks(spec, r)) {
      const bool first = !sum_like && present[b]++ == 0;
      block_values(spec, r, b, [&](std::size_t i, int v) {
        if (is_int) {
          const std::int32_t x = v * 1000003;
          std::uint32_t& a = acci[i];
          const auto ai = static_cast<std::int32_t>(a);
          if (op == ReduceOp::avg) acc_avg[i] += x;
          if (sum_like) a += static_cast<std::uint32_t>(x);
          else if (first) a = static_cast<std::uint32_t>(x);
          else if (op == ReduceOp::min) a = static_cast<std::uint32_t>(std::min(ai, x));
          else a = static_cast<std::uint32_t>(std::max(ai, x));
          return;
        }
        const float x = value_as_float(spec.dtype, v);
        float& a = accf[i];
        if (sum_like) a += x;
        else if (first) a = x;
        else if (op == ReduceOp::min) a = std::min(a, x);
        else a = std::max(a, x);
      });
    }
  }
  if (!sum_like) {  // blocks some rank left zero: that rank's 0 takes part in the min / max
    for (std::size_t b = 0; b < nblocks; ++b) {
      if (present[b] == static_cast<std::uint32_t>(spec.world_size)) continue;
      const std::size_t first = b * spec.block_elems;
      const std::size_t last = std::min<std::size_t>(n, first + spec.block_elems);
      for (std::size_t i = first; i < last; ++i) {
        if (is_int) {
          const auto ai = static_cast<std::int32_t>(acci[i]);
          const std::int32_t v = present[b] == 0 ? 0 : (op == ReduceOp::min ? std::min(ai, 0) : std::max(ai, 0));
          acci[i] = static_cast<std::uint32_t>(v);
        } else {
          accf[i] = present[b] == 0 ? 0.0f : (op == ReduceOp::min ? std::min(accf[i], 0.0f) : std::max(accf[i], 0.0f));
        }
      }
    }
  }
  out->assign(n * dtype_size(spec.dtype), std::byte{0});
  const auto w = static_cast<std::uint32_t>(spec.world_size);
  for (std::size_t i = 0; i < n; ++i) {
    if (is_int) {
      auto v = static_cast<std::int32_t>(acci[i]);
      if (op == ReduceOp::avg) v = static_cast<std::int32_t>(acc_avg[i] / static_cast<std::int64_t>(w));
      as<std::int32_t>(*out)[i] = v;
      continue;
    }
    float v = accf[i];
    if (op == ReduceOp::avg) v = v / static_cast<float>(w);
    switch (spec.dtype) {
      case DataType::f32: as<float>(*out)[i] = v; break;
      case DataType::f16: as<std::uint16_t>(*out)[i] = float_to_half(v); break;
      case DataType::bf16: as<std::uint16_t>(*out)[i] = float_to_bf16(v); break;
      case DataType::i32: break;
      case DataType::f64:  // not benchmarked: the sweep takes the 32-bit types only (sweep.cpp)
      case DataType::i64: break;
    }
  }
}

namespace {

// One dtype's comparison loop: the element read is inlined, not a call per element (which in an
// ASan build costs a fake stack frame each time).
template <typename T, typename ToDouble>
std::size_t count_wrong_as(const std::vector<std::byte>& got, const std::vector<std::byte>& want, std::size_t n,
                           ToDouble to_double, std::string* first) {
  const T* g_data = as<T>(got);
  const T* w_data = as<T>(want);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double g = to_double(g_data[i]), w = to_double(w_data[i]);
    const bool equal = (g == w) || (std::isnan(g) && std::isnan(w));
    if (!equal) {
      if (wrong == 0 && first != nullptr)
        *first = "element " + std::to_string(i) + ": got " + std::to_string(g) + ", want " + std::to_string(w);
      ++wrong;
    }
  }
  return wrong;
}

}  // namespace

std::size_t count_wrong(const std::vector<std::byte>& got, const std::vector<std::byte>& want, DataType dtype,
                        std::string* first) {
  const std::size_t n = want.size() / dtype_size(dtype);
  if (got.size() < want.size()) {
    if (first != nullptr) *first = "result has " + std::to_string(got.size()) + " bytes, want " + std::to_string(want.size());
    return n;
  }
  switch (dtype) {
    case DataType::f32: return count_wrong_as<float>(got, want, n, [](float v) { return double{v}; }, first);
    case DataType::f16:
      return count_wrong_as<std::uint16_t>(got, want, n, [](std::uint16_t v) { return double{half_to_float(v)}; }, first);
    case DataType::bf16:
      return count_wrong_as<std::uint16_t>(got, want, n, [](std::uint16_t v) { return double{bf16_to_float(v)}; }, first);
    case DataType::i32: return count_wrong_as<std::int32_t>(got, want, n, [](std::int32_t v) { return double(v); }, first);
    case DataType::f64: return count_wrong_as<double>(got, want, n, [](double v) { return v; }, first);
    case DataType::i64:
      return count_wrong_as<std::int64_t>(got, want, n, [](std::int64_t v) { return static_cast<double>(v); }, first);
  }
  return n;
}

}  // namespace sparcoll::perf
