#include "mix.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <utility>

namespace sparcoll::soak {

namespace {

constexpr std::size_t kKiB = 1024, kMiB = 1024 * 1024;

constexpr std::array<Algorithm, 8> kAllreduceAlgorithms = {
    Algorithm::from_options, Algorithm::auto_select,           Algorithm::block_sparse,
    Algorithm::ring,         Algorithm::butterfly,             Algorithm::ssar_recursive_doubling,
    Algorithm::ssar_split_allgather, Algorithm::dsar_split_allgather};
constexpr std::array<Algorithm, 4> kSparseAlgorithms = {Algorithm::from_options, Algorithm::ssar_recursive_doubling,
                                                        Algorithm::ssar_split_allgather,
                                                        Algorithm::dsar_split_allgather};
constexpr std::array<DataType, 4> kDtypes = {DataType::f32, DataType::f16, DataType::bf16, DataType::i32};
constexpr std::array<ReduceOp, 4> kOps = {ReduceOp::sum, ReduceOp::avg, ReduceOp::min, ReduceOp::max};
constexpr std::array<double, 7> kDensities = {0, 0.001, 0.01, 0.1, 0.5, 0.9, 1};
constexpr std::array<perf::Pattern, 4> kPatterns = {perf::Pattern::random, perf::Pattern::overlap,
                                                    perf::Pattern::disjoint, perf::Pattern::one_dense};

template <typename T, std::size_t N>
T pick(std::mt19937_64& rng, const std::array<T, N>& from) {
  return from[std::uniform_int_distribution<std::size_t>(0, N - 1)(rng)];
}

bool chance(std::mt19937_64& rng, double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; }

// Draws an index from integer weights.
std::size_t weighted(std::mt19937_64& rng, const std::vector<int>& weights) {
  int total = 0;
  for (int w : weights) total += w;
  int x = std::uniform_int_distribution<int>(0, total - 1)(rng);
  for (std::size_t i = 0; i < weights.size(); ++i) {
    if (x < weights[i]) return i;
    x -= weights[i];
  }
  return weights.size() - 1;
}

std::uint64_t mix64(std::uint64_t a, std::uint64_t b) {
  std::uint64_t z = a + 0x9e3779b97f4a7c15ull * (b + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::allreduce: return "allreduce";
    case Kind::broadcast: return "broadcast";
    case Kind::allgather: return "allgather";
    case Kind::reduce_scatter: return "reduce_scatter";
    case Kind::barrier: return "barrier";
    case Kind::sparse: return "sparse";
    case Kind::compressed: return "compressed";
    case Kind::rejected: return "rejected";
    case Kind::reduce: return "reduce";
    case Kind::gather: return "gather";
    case Kind::scatter: return "scatter";
    case Kind::all_to_all: return "all_to_all";
    case Kind::p2p: return "p2p";
    case Kind::coalesced: return "coalesced";
  }
  return "?";
}

std::vector<Kind> all_kinds() {
  return {Kind::allreduce, Kind::broadcast, Kind::allgather, Kind::reduce_scatter, Kind::barrier,
          Kind::sparse,    Kind::compressed, Kind::rejected, Kind::reduce,         Kind::gather,
          Kind::scatter,   Kind::all_to_all, Kind::p2p,      Kind::coalesced};
}

bool reduces(Kind k) {
  return k == Kind::allreduce || k == Kind::reduce_scatter || k == Kind::sparse || k == Kind::reduce ||
         k == Kind::coalesced;
}

bool rooted(Kind k) { return k == Kind::broadcast || k == Kind::reduce || k == Kind::gather || k == Kind::scatter; }

std::size_t per_rank_divisor(Kind k, int world) {
  const bool per_rank = k == Kind::allgather || k == Kind::reduce_scatter || k == Kind::gather || k == Kind::scatter ||
                        k == Kind::all_to_all;
  return per_rank ? static_cast<std::size_t>(world) : 1;
}

bool parse_kind(std::string_view name, Kind* out) {
  for (Kind k : all_kinds())
    if (name == kind_name(k)) {
      *out = k;
      return true;
    }
  return false;
}

std::string Call::describe() const {
  // Appended piece by piece: GCC 12 warns (-Wrestrict, falsely) about "literal" + std::string&&.
  std::string s = kind_name(kind);
  auto add = [&s](std::string_view piece) {
    s += ' ';
    s += piece;
  };
  if (kind == Kind::barrier) return s;
  if (kind == Kind::allreduce || kind == Kind::sparse) add(algorithm_name(algo));
  if (kind == Kind::compressed) {
    add("tensor");
    add(std::to_string(tensor));
    if (nonblocking) add("non-blocking");
    return s;
  }
  if (kind == Kind::rejected) {
    add("fault");
    add(std::to_string(fault));
    return s;
  }
  add(dtype_name(dtype));
  if (reduces(kind)) add(reduce_op_name(op));
  add("count=" + std::to_string(count));
  char density_text[32];
  std::snprintf(density_text, sizeof density_text, "density=%g", density);
  add(density_text);
  add(perf::pattern_name(pattern));
  if (rooted(kind)) add("root=" + std::to_string(root));
  if (in_place) add("in-place");
  if (nonblocking) add("non-blocking");
  if (register_send) add("registered");
  add("seed=" + std::to_string(seed));
  return s;
}

Mix::Mix(MixOptions options) : options_(std::move(options)), rng_(mix64(options_.seed, 0x50a4)) {
  if (options_.kinds.empty()) options_.kinds = all_kinds();
  if (options_.tensors == 0) options_.kinds.erase(std::remove(options_.kinds.begin(), options_.kinds.end(), Kind::compressed), options_.kinds.end());
  if (options_.faults == 0) options_.kinds.erase(std::remove(options_.kinds.begin(), options_.kinds.end(), Kind::rejected), options_.kinds.end());
  // send and recv need a peer: a rank may not send to itself.
  if (options_.world < 2) options_.kinds.erase(std::remove(options_.kinds.begin(), options_.kinds.end(), Kind::p2p), options_.kinds.end());

  // The primer: each kind at its largest size and densest, every compressed tensor and every bad
  // call, and one full batch of non-blocking calls.
  auto largest = [&](Kind kind, DataType dtype) {
    Call c = draw_call(kind, false, kind_max_bytes(kind));
    c.dtype = dtype;
    const std::size_t bytes = kind_max_bytes(kind);
    c.count = bytes / dtype_size(dtype) / per_rank_divisor(kind, options_.world);
    c.density = 1;
    c.pattern = perf::Pattern::random;
    return c;
  };
  // Every dtype of every algorithm: the peer-to-peer algorithms keep their scratch buffers at
  // the largest size they have needed, and that depends on the element count (2-byte dtypes
  // have twice as many) and on the accumulators (fp32 for f16 and bf16), not only on the bytes.
  for (DataType dtype : kDtypes) {
    if (enabled(Kind::allreduce))
      for (Algorithm a : kAllreduceAlgorithms) {
        Call c = largest(Kind::allreduce, dtype);
        c.algo = a;
        primer_.push_back({{c}});
      }
    for (Kind k : {Kind::broadcast, Kind::allgather, Kind::reduce_scatter, Kind::reduce, Kind::gather, Kind::scatter,
                   Kind::all_to_all, Kind::p2p, Kind::coalesced})
      if (enabled(k)) primer_.push_back({{largest(k, dtype)}});
    if (enabled(Kind::sparse))
      for (Algorithm a : kSparseAlgorithms) {
        Call c = largest(Kind::sparse, dtype);
        c.algo = a;
        primer_.push_back({{c}});
      }
  }
  if (enabled(Kind::barrier)) primer_.push_back({{draw_call(Kind::barrier, false, 0)}});
  if (enabled(Kind::compressed))
    for (std::size_t t = 0; t < options_.tensors; ++t) {
      Call c = draw_call(Kind::compressed, false, 0);
      c.tensor = static_cast<int>(t);
      primer_.push_back({{c}});
    }
  if (enabled(Kind::rejected))
    for (int f = 0; f < options_.faults; ++f) {
      Call c = draw_call(Kind::rejected, false, 0);
      c.fault = f;
      primer_.push_back({{c}});
    }
  if (options_.max_batch > 1 && enabled(Kind::allreduce)) {
    Step batch;
    for (int b = 0; b < options_.max_batch; ++b) {
      Call c = largest(Kind::allreduce, kDtypes[static_cast<std::size_t>(b) % kDtypes.size()]);
      c.count = std::min(kBatchMaxBytes, options_.max_bytes) / dtype_size(c.dtype);
      c.algo = kAllreduceAlgorithms[static_cast<std::size_t>(b) % kAllreduceAlgorithms.size()];
      c.nonblocking = true;
      batch.calls.push_back(c);
    }
    primer_.push_back(batch);
  }
}

bool Mix::enabled(Kind kind) const {
  return std::find(options_.kinds.begin(), options_.kinds.end(), kind) != options_.kinds.end();
}

std::size_t Mix::kind_max_bytes(Kind kind) const {
  switch (kind) {
    case Kind::sparse: return std::min(options_.max_bytes, kSparseMaxBytes);
    default: return options_.max_bytes;
  }
}

Step Mix::next() {
  if (primed_ < primer_.size()) return primer_[primed_++];
  return draw();
}

Step Mix::draw() {
  // Step shapes by weight: a single call of each kind, or a batch of non-blocking calls.
  static const std::vector<std::pair<Kind, int>> kWeights = {
      {Kind::allreduce, 40}, {Kind::broadcast, 8}, {Kind::allgather, 8},  {Kind::reduce_scatter, 8},
      {Kind::barrier, 4},    {Kind::sparse, 10},   {Kind::compressed, 7}, {Kind::rejected, 1},
      {Kind::reduce, 5},     {Kind::gather, 4},    {Kind::scatter, 4},    {Kind::all_to_all, 4},
      {Kind::p2p, 4},        {Kind::coalesced, 5}};
  static const std::vector<std::pair<Kind, int>> kBatchWeights = {
      {Kind::allreduce, 6}, {Kind::broadcast, 1}, {Kind::allgather, 1},  {Kind::reduce_scatter, 1},
      {Kind::sparse, 1},    {Kind::reduce, 1},    {Kind::gather, 1},     {Kind::scatter, 1},
      {Kind::all_to_all, 1}, {Kind::p2p, 1},      {Kind::coalesced, 1}};
  std::vector<Kind> kinds, batch_kinds;
  std::vector<int> weights, batch_weights;
  for (const auto& [k, w] : kWeights)
    if (enabled(k)) kinds.push_back(k), weights.push_back(w);
  for (const auto& [k, w] : kBatchWeights)
    if (enabled(k)) batch_kinds.push_back(k), batch_weights.push_back(w);
  const bool batches = options_.max_batch > 1 && !batch_kinds.empty();
  if (batches) {
    kinds.push_back(Kind::barrier);  // stands for "a batch" below
    weights.push_back(14);
  }
  const std::size_t at = weighted(rng_, weights);
  Step step;
  if (batches && at == kinds.size() - 1) {
    const int n = std::uniform_int_distribution<int>(2, options_.max_batch)(rng_);
    for (int i = 0; i < n; ++i) {
      const Kind k = batch_kinds[weighted(rng_, batch_weights)];
      step.calls.push_back(draw_call(k, true, std::min(kind_max_bytes(k), kBatchMaxBytes)));
    }
    return step;
  }
  const Kind k = kinds[at];
  step.calls.push_back(draw_call(k, chance(rng_, 0.3), kind_max_bytes(k)));
  return step;
}

Call Mix::draw_call(Kind kind, bool nonblocking, std::size_t max_bytes) {
  Call c;
  c.kind = kind;
  c.seed = mix64(options_.seed, ++calls_);
  c.nonblocking = nonblocking && kind != Kind::barrier && kind != Kind::rejected;
  c.dtype = pick(rng_, kDtypes);
  c.op = pick(rng_, kOps);
  c.density = pick(rng_, kDensities);
  c.pattern = pick(rng_, kPatterns);
  c.in_place = chance(rng_, 0.5);
  c.count = max_bytes == 0 ? 0 : draw_count(c.dtype, max_bytes / per_rank_divisor(kind, options_.world));
  switch (kind) {
    case Kind::allreduce:
      c.algo = pick(rng_, kAllreduceAlgorithms);
      c.register_send = !c.nonblocking && chance(rng_, 0.1);
      break;
    case Kind::sparse: c.algo = pick(rng_, kSparseAlgorithms); break;
    case Kind::broadcast:
    case Kind::reduce:
    case Kind::gather:
    case Kind::scatter:
      c.root = std::uniform_int_distribution<int>(0, options_.world - 1)(rng_);
      break;
    case Kind::compressed:
      c.tensor = std::uniform_int_distribution<int>(0, static_cast<int>(options_.tensors) - 1)(rng_);
      break;
    case Kind::rejected:
      c.fault = std::uniform_int_distribution<int>(0, options_.faults - 1)(rng_);
      break;
    default: break;
  }
  return c;
}

std::size_t Mix::draw_count(DataType dtype, std::size_t max_bytes) {
  const std::size_t esize = dtype_size(dtype);
  const std::size_t max_elems = max_bytes / esize;
  // Size classes by weight: empty, one element, odd counts around a 256-element block, then
  // 4 KiB to 16 MiB with odd tails. A class above the cap gives the cap's own size.
  static const std::vector<int> kWeights = {3, 5, 27, 25, 20, 14, 5, 1};
  static const std::array<std::size_t, 5> kSmall = {3, 7, 255, 257, 1283};
  static const std::array<std::size_t, 5> kBytes = {4 * kKiB, 64 * kKiB, kMiB, 4 * kMiB, 16 * kMiB};
  const std::size_t cls = weighted(rng_, kWeights);
  std::size_t n = 0;
  if (cls == 1) n = 1;
  else if (cls == 2) n = pick(rng_, kSmall);
  else if (cls >= 3) {
    n = kBytes[cls - 3] / esize;
    if (chance(rng_, 0.5)) n += 2 * std::uniform_int_distribution<std::size_t>(0, 255)(rng_) + 1;  // an odd tail
  }
  if (n > max_elems) n = max_elems;
  return n;
}

}  // namespace sparcoll::soak
