// allreduce_sparse: each rank gives the non-zero elements of its seeded dense tensor as (index,
// value) pairs, so the reduced values must equal the dense reference and the result's indices the
// union of every rank's non-zero positions.
#include <cstring>

#include "calls.hpp"

namespace sparcoll::soak {

namespace {

bool is_zero(const std::byte* element, std::size_t esize) {
  for (std::size_t k = 0; k < esize; ++k)
    if (element[k] != std::byte{0}) return false;
  return true;
}

// Whether `call` may come back dense: only the dynamic algorithm densifies.
bool may_densify(const Context& ctx, const Call& call) {
  if (call.algo == Algorithm::dsar_split_allgather) return true;
  if (call.algo != Algorithm::from_options) return false;
  const std::string& configured = ctx.comm.options().algo;
  return configured != "ssar_recursive_doubling" && configured != "ssar_split_allgather";
}

std::string wrong(const Call& call, const std::string& what) { return "wrong result: " + call.describe() + ": " + what; }

}  // namespace

void start_sparse(Context& ctx, Slot& s, const Call& c) {
  const std::size_t esize = dtype_size(c.dtype);
  perf::generate(workload_of(ctx, c, c.count), ctx.rank, &s.scratch);
  s.indices.clear();
  s.send.clear();
  for (std::size_t i = 0; i < c.count; ++i) {
    const std::byte* e = s.scratch.data() + i * esize;
    if (is_zero(e, esize)) continue;
    s.indices.push_back(static_cast<std::int64_t>(i));
    s.send.insert(s.send.end(), e, e + esize);
  }
  // The inputs are copied by the call; the slot keeps them only to reuse their capacity.
  if (c.nonblocking)
    s.request = ctx.comm.iallreduce_sparse(s.indices.data(), s.send.data(), s.indices.size(), c.count, c.dtype, c.op,
                                           &s.sparse, c.algo);
  else
    ctx.comm.allreduce_sparse(s.indices.data(), s.send.data(), s.indices.size(), c.count, c.dtype, c.op, &s.sparse,
                              c.algo);
}

std::string finish_sparse(Context& ctx, Slot& s, const Call& c, bool check) {
  if (s.request.valid()) s.request.wait();
  s.request = Request();
  const SparseResult& got = s.sparse;
  const std::uint8_t dense = got.dense ? 1 : 0;
  ctx.fold(&dense, 1);
  ctx.fold(got.indices.data(), got.indices.size() * sizeof(std::int64_t));
  ctx.fold(got.values.data(), got.values.size());
  if (!check) return std::string();

  const std::size_t esize = dtype_size(c.dtype);
  if (got.dim != c.count || got.dtype != c.dtype) return wrong(c, "dim or dtype of the result not filled in");
  const perf::WorkloadSpec spec = workload_of(ctx, c, c.count);
  perf::reference(spec, c.op, &s.want);
  std::string what;
  if (got.dense) {
    if (!may_densify(ctx, c)) return wrong(c, "a static sparse algorithm returned a dense result");
    if (got.values.size() != c.count * esize) return wrong(c, "dense result of " + std::to_string(got.values.size()) + " bytes");
    const std::size_t n = perf::count_wrong(got.values, s.want, c.dtype, &what);
    return n == 0 ? std::string() : wrong(c, std::to_string(n) + " wrong elements, first " + what);
  }
  // The union of the non-zero positions of every rank's input.
  s.mask.assign(c.count, 0);
  std::size_t union_size = 0;
  for (int r = 0; r < ctx.world; ++r) {
    perf::generate(spec, r, &s.scratch);
    for (std::size_t i = 0; i < c.count; ++i)
      if (!s.mask[i] && !is_zero(s.scratch.data() + i * esize, esize)) s.mask[i] = 1, ++union_size;
  }
  if (got.indices.size() != union_size)
    return wrong(c, std::to_string(got.indices.size()) + " indices, the union of the inputs has " + std::to_string(union_size));
  if (got.values.size() != got.indices.size() * esize) return wrong(c, "values and indices differ in length");
  s.recv.assign(c.count * esize, std::byte{0});
  for (std::size_t k = 0; k < got.indices.size(); ++k) {
    const std::int64_t i = got.indices[k];
    if (i < 0 || static_cast<std::size_t>(i) >= c.count || !s.mask[static_cast<std::size_t>(i)] ||
        (k > 0 && got.indices[k - 1] >= i))
      return wrong(c, "index " + std::to_string(i) + " at position " + std::to_string(k) +
                          " is out of range, repeated, unsorted or no rank's");
    std::memcpy(s.recv.data() + static_cast<std::size_t>(i) * esize, got.values.data() + k * esize, esize);
  }
  const std::size_t n = perf::count_wrong(s.recv, s.want, c.dtype, &what);
  return n == 0 ? std::string() : wrong(c, std::to_string(n) + " wrong elements, first " + what);
}

}  // namespace sparcoll::soak
