// sparcoll-sparse-check: run under sparcoll-run; every rank runs a matrix of allreduce_sparse
// cases on seeded sparse vectors and checks each SparseResult against a plain reference merge:
// the result's indices must be the union of every rank's indices (or the result dense, for
// dsar_split_allgather only), and its values exact (the generated values are multiples of 0.5,
// exact in every dtype and summation order). --random-floats uses f32 values in (-1, 1) instead:
// the split algorithms still reduce in rank order (exact); recursive doubling adds in a tree,
// so it must lie within the stated bound |got - ref| <= 2 (p-1) u sum|x| (u = 2^-24).
// Every result is hashed and the hashes compared across ranks: bitwise identical everywhere.
//
//   sparcoll-sparse-check [--algos ssar_recursive_doubling,ssar_split_allgather,dsar_split_allgather,default]
//                         [--dtypes f32,f16,bf16,i32] [--ops sum,avg,min,max] [--dims 0,1,7,255,1283]
//                         [--fills 0,0.01,0.3,0.7,1] [--patterns same,random,disjoint]
//                         [--inflight N] [--seed S] [--random-floats]
// Prints "sparcoll-sparse-check: N cases passed" on rank 0; exits 1 on the first wrong result.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "sparcoll/sparcoll.hpp"
#include "workload.hpp"

namespace {

using sparcoll::DataType;
using sparcoll::ReduceOp;

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) parts.push_back(part);
  return parts;
}

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr, "sparcoll-sparse-check: %s\n", why.c_str());
  std::exit(2);
}

enum class Pattern { same, random, disjoint };

struct Spec {
  sparcoll::Algorithm algo;
  std::string algo_name;
  DataType dtype;
  ReduceOp op;
  std::size_t dim;
  double fill;
  Pattern pattern;
  std::uint64_t seed;
  bool random_floats;
};

// One rank's input: sorted unique indices and their values as doubles (exact in the dtype).
struct Input {
  std::vector<std::int64_t> idx;
  std::vector<double> val;
};

Input make_input(const Spec& s, int rank, int world) {
  Input in;
  std::vector<std::int64_t> candidates;
  for (std::size_t i = 0; i < s.dim; ++i)
    if (s.pattern != Pattern::disjoint || static_cast<int>(i % static_cast<std::size_t>(world)) == rank)
      candidates.push_back(static_cast<std::int64_t>(i));
  std::mt19937_64 pick(s.seed * 1000003 + (s.pattern == Pattern::same ? 999 : static_cast<std::uint64_t>(rank)));
  const auto k = std::min<std::size_t>(candidates.size(), static_cast<std::size_t>(std::llround(s.fill * static_cast<double>(s.dim))));
  for (std::size_t i = 0; i < k; ++i) {
    std::uniform_int_distribution<std::size_t> d(i, candidates.size() - 1);
    std::swap(candidates[i], candidates[d(pick)]);
  }
  candidates.resize(k);
  std::sort(candidates.begin(), candidates.end());
  in.idx = candidates;
  std::mt19937_64 vals(s.seed * 7919 + static_cast<std::uint64_t>(rank) + 1);
  for (std::size_t i = 0; i < k; ++i) {
    if (s.random_floats) {
      in.val.push_back(static_cast<double>(std::uniform_real_distribution<float>(-1.0f, 1.0f)(vals)));
      continue;
    }
    const int m = static_cast<int>(vals() % 64) + 1;
    const int v = (vals() & 1) ? -m : m;
    in.val.push_back(s.dtype == DataType::i32 ? static_cast<double>(v) * 1000003.0 : static_cast<double>(v) * 0.5);
  }
  return in;
}

// The values as the dtype's bytes.
std::vector<std::byte> to_bytes(const std::vector<double>& v, DataType dt) {
  std::vector<std::byte> out(v.size() * sparcoll::dtype_size(dt));
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (dt == DataType::i32) {
      const auto x = static_cast<std::int32_t>(v[i]);
      std::memcpy(&out[i * 4], &x, 4);
    } else if (dt == DataType::f32) {
      const auto x = static_cast<float>(v[i]);
      std::memcpy(&out[i * 4], &x, 4);
    } else {
      // Exactly representable half values: truncating the fp32 bits is exact for f16 via the
      // library-independent F16C path of the perf library's reference; do it by hand here.
      const auto f = static_cast<float>(v[i]);
      std::uint16_t h;
      if (dt == DataType::bf16) {
        std::uint32_t u;
        std::memcpy(&u, &f, 4);
        h = static_cast<std::uint16_t>(u >> 16);
      } else {
        h = static_cast<std::uint16_t>(_cvtss_sh(f, 0));
      }
      std::memcpy(&out[i * 2], &h, 2);
    }
  }
  return out;
}

struct Reference {
  std::vector<std::int64_t> union_idx;
  std::vector<std::byte> dense;  // dim elements of dtype
  std::vector<double> abs_sum;   // per element: sum of |x| over ranks (for the fp bound)
};

Reference reference(const Spec& s, int world) {
  std::vector<Input> inputs;
  for (int r = 0; r < world; ++r) inputs.push_back(make_input(s, r, world));
  std::map<std::int64_t, std::vector<std::pair<int, double>>> by_index;
  for (int r = 0; r < world; ++r)
    for (std::size_t k = 0; k < inputs[r].idx.size(); ++k) by_index[inputs[r].idx[k]].push_back({r, inputs[r].val[k]});
  Reference ref;
  ref.abs_sum.assign(s.dim, 0.0);
  std::vector<std::byte> wide(s.dim * 4, std::byte{0});  // fp32 / int32 accumulators
  const bool is_int = s.dtype == DataType::i32;
  for (const auto& [i, contributions] : by_index) {
    ref.union_idx.push_back(i);
    float f = 0;
    std::uint32_t n = 0;
    if (s.op == ReduceOp::sum || s.op == ReduceOp::avg) {
      // Rank order, starting from the first present rank (what a plain merge does).
      bool first = true;
      for (const auto& [r, v] : contributions) {
        ref.abs_sum[static_cast<std::size_t>(i)] += std::fabs(v);
        if (is_int) n += static_cast<std::uint32_t>(static_cast<std::int32_t>(v));
        else f = first ? static_cast<float>(v) : f + static_cast<float>(v);
        first = false;
      }
    } else {
      // Every rank takes part, an absent one with 0.
      std::vector<double> all(static_cast<std::size_t>(world), 0.0);
      for (const auto& [r, v] : contributions) all[static_cast<std::size_t>(r)] = v;
      double m = all[0];
      for (double v : all) m = s.op == ReduceOp::min ? std::min(m, v) : std::max(m, v);
      if (is_int) n = static_cast<std::uint32_t>(static_cast<std::int32_t>(m));
      else f = static_cast<float>(m);
    }
    if (s.op == ReduceOp::avg) {
      if (is_int) n = static_cast<std::uint32_t>(static_cast<std::int32_t>(n) / world);
      else f = f / static_cast<float>(world);
    }
    if (is_int) std::memcpy(&wide[static_cast<std::size_t>(i) * 4], &n, 4);
    else std::memcpy(&wide[static_cast<std::size_t>(i) * 4], &f, 4);
  }
  // Narrow once (round to nearest even), like the library.
  std::vector<double> as_double(s.dim);
  for (std::size_t i = 0; i < s.dim; ++i) {
    if (is_int) {
      std::int32_t x;
      std::memcpy(&x, &wide[i * 4], 4);
      as_double[i] = x;
    } else {
      float x;
      std::memcpy(&x, &wide[i * 4], 4);
      as_double[i] = x;
    }
  }
  if (s.dtype == DataType::bf16) {
    ref.dense.resize(s.dim * 2);
    for (std::size_t i = 0; i < s.dim; ++i) {
      float f = static_cast<float>(as_double[i]);
      std::uint32_t u;
      std::memcpy(&u, &f, 4);
      u += 0x7fff + ((u >> 16) & 1);
      const auto h = static_cast<std::uint16_t>(u >> 16);
      std::memcpy(&ref.dense[i * 2], &h, 2);
    }
  } else {
    ref.dense = to_bytes(as_double, s.dtype);
  }
  return ref;
}

std::int32_t fnv1a(const sparcoll::SparseResult& r) {
  std::uint32_t h = 2166136261u;
  auto mix = [&h](const void* p, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) h = (h ^ static_cast<const std::uint8_t*>(p)[i]) * 16777619u;
  };
  const std::uint8_t dense = r.dense;
  mix(&dense, 1);
  mix(r.indices.data(), r.indices.size() * 8);
  mix(r.values.data(), r.values.size());
  return static_cast<std::int32_t>(h);
}

// Empty when `got` is right, else the first problem.
std::string check(const Spec& s, int world, const sparcoll::SparseResult& got) {
  const Reference ref = reference(s, world);
  const std::size_t esize = sparcoll::dtype_size(s.dtype);
  if (got.dim != s.dim || got.dtype != s.dtype) return "result dim or dtype not filled in";
  std::vector<std::byte> dense(s.dim * esize, std::byte{0});
  if (got.dense) {
    if (s.algo == sparcoll::Algorithm::ssar_recursive_doubling || s.algo == sparcoll::Algorithm::ssar_split_allgather)
      return "a static sparse algorithm returned a dense result";
    if (got.values.size() != s.dim * esize) return "dense result of the wrong size";
    dense = got.values;
  } else {
    if (got.indices != ref.union_idx)
      return "indices: " + std::to_string(got.indices.size()) + " entries, the union of the inputs has " +
             std::to_string(ref.union_idx.size());
    if (got.values.size() != got.indices.size() * esize) return "values and indices differ in length";
    for (std::size_t k = 0; k < got.indices.size(); ++k)
      std::memcpy(&dense[static_cast<std::size_t>(got.indices[k]) * esize], &got.values[k * esize], esize);
  }
  if (s.random_floats && s.algo == sparcoll::Algorithm::ssar_recursive_doubling &&
      (s.op == ReduceOp::sum || s.op == ReduceOp::avg)) {
    for (std::size_t i = 0; i < s.dim; ++i) {
      float g, w;
      std::memcpy(&g, &dense[i * 4], 4);
      std::memcpy(&w, &ref.dense[i * 4], 4);
      const double bound = 2.0 * (world - 1) * std::ldexp(1.0, -24) * 1.01 * ref.abs_sum[i] / (s.op == ReduceOp::avg ? world : 1);
      if (std::fabs(static_cast<double>(g) - w) > bound + 1e-30)
        return "element " + std::to_string(i) + ": " + std::to_string(g) + " vs reference " + std::to_string(w) +
               " beyond the bound " + std::to_string(bound);
    }
    return std::string();
  }
  std::string where;
  const std::size_t wrong = sparcoll::perf::count_wrong(dense, ref.dense, s.dtype, &where);
  if (wrong != 0) return std::to_string(wrong) + " wrong elements, first " + where;
  return std::string();
}

std::string label(const Spec& s) {
  const char* pattern = s.pattern == Pattern::same ? "same" : s.pattern == Pattern::random ? "random" : "disjoint";
  return s.algo_name + " " + std::string(sparcoll::dtype_name(s.dtype)) + " " +
         std::string(sparcoll::reduce_op_name(s.op)) + " dim=" + std::to_string(s.dim) +
         " fill=" + std::to_string(s.fill) + " " + pattern + (s.random_floats ? " random-floats" : "");
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> algos = {"ssar_recursive_doubling", "ssar_split_allgather", "dsar_split_allgather"},
                           dtypes = {"f32", "f16", "bf16", "i32"}, ops = {"sum", "avg", "min", "max"},
                           dims = {"0", "1", "7", "255", "1283"}, fills = {"0", "0.01", "0.3", "0.7", "1"},
                           patterns = {"same", "random", "disjoint"};
  int inflight = 3;
  std::uint64_t seed = 11;
  bool random_floats = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--random-floats") {
      random_floats = true;
      continue;
    }
    if (i + 1 >= argc) usage("missing value after " + a);
    const std::string v = argv[++i];
    if (a == "--algos") algos = split(v);
    else if (a == "--dtypes") dtypes = split(v);
    else if (a == "--ops") ops = split(v);
    else if (a == "--dims") dims = split(v);
    else if (a == "--fills") fills = split(v);
    else if (a == "--patterns") patterns = split(v);
    else if (a == "--inflight") inflight = std::atoi(v.c_str());
    else if (a == "--seed") seed = std::strtoull(v.c_str(), nullptr, 10);
    else usage("unknown flag " + a);
  }
  if (inflight < 1) usage("--inflight must be >= 1");
  try {
    sparcoll::Communicator comm = sparcoll::Communicator::from_env();
    const int world = comm.size(), rank = comm.rank();
    std::vector<Spec> specs;
    for (const auto& al : algos)
      for (const auto& dt : dtypes)
        for (const auto& op : ops)
          for (const auto& dim : dims)
            for (const auto& fill : fills)
              for (const auto& pat : patterns) {
                Spec s;
                s.algo_name = al;
                if (al == "default") {
                  s.algo = sparcoll::Algorithm::from_options;
                } else {
                  const auto a = sparcoll::parse_algorithm(al);
                  if (!a) usage("unknown algorithm " + al);
                  s.algo = *a;
                }
                const auto d = sparcoll::parse_dtype(dt);
                const auto o = sparcoll::parse_reduce_op(op);
                if (!d || !o) usage("bad dtype or op " + dt + " " + op);
                s.dtype = *d;
                s.op = *o;
                s.dim = std::strtoull(dim.c_str(), nullptr, 10);
                s.fill = std::atof(fill.c_str());
                s.pattern = pat == "same" ? Pattern::same : pat == "random" ? Pattern::random : pat == "disjoint" ? Pattern::disjoint : (usage("bad pattern " + pat), Pattern::same);
                s.seed = seed + specs.size();
                s.random_floats = random_floats;
                if (random_floats && s.dtype != DataType::f32) continue;  // the bound is stated for f32
                specs.push_back(s);
              }
    // Results are reused across cases, as an application would: steady state allocates nothing.
    std::vector<sparcoll::SparseResult> results(static_cast<std::size_t>(inflight));
    std::size_t passed = 0;
    for (std::size_t first = 0; first < specs.size(); first += static_cast<std::size_t>(inflight)) {
      const std::size_t last = std::min(specs.size(), first + static_cast<std::size_t>(inflight));
      std::vector<sparcoll::Request> requests;
      for (std::size_t i = first; i < last; ++i) {
        const Spec& s = specs[i];
        const Input in = make_input(s, rank, world);
        const std::vector<std::byte> values = to_bytes(in.val, s.dtype);
        // The inputs go out of scope at once: the call copies them.
        requests.push_back(comm.iallreduce_sparse(in.idx.data(), values.data(), in.idx.size(), s.dim, s.dtype, s.op,
                                                  &results[i - first], s.algo));
      }
      for (std::size_t i = first; i < last; ++i) {
        const Spec& s = specs[i];
        requests[i - first].wait();
        Spec effective = s;
        if (s.algo == sparcoll::Algorithm::from_options) effective.algo = sparcoll::Algorithm::dsar_split_allgather;
        const sparcoll::SparseResult& got = results[i - first];
        if (std::string problem = check(effective, world, got); !problem.empty()) {
          std::fprintf(stderr, "sparcoll-sparse-check: rank %d: %s: %s\n", rank, label(s).c_str(), problem.c_str());
          return 1;
        }
        const std::int32_t h = fnv1a(got);
        std::int32_t hashes[2] = {h, ~h};
        comm.allreduce(hashes, hashes, 2, DataType::i32, ReduceOp::max);
        if (hashes[0] != ~hashes[1]) {
          std::fprintf(stderr, "sparcoll-sparse-check: rank %d: %s: results differ between ranks (bytes, not values)\n",
                       rank, label(s).c_str());
          return 1;
        }
        ++passed;
      }
    }
    if (rank == 0)
      std::printf("sparcoll-sparse-check: %zu cases passed on %d ranks over %s\n", passed, world,
                  comm.transport_name().c_str());
    return 0;
  } catch (const sparcoll::Error& e) {
    std::fprintf(stderr, "sparcoll-sparse-check: %s\n", e.what());
    return 1;
  }
}
