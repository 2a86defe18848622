// allreduce_compressed over a fixed table of tensors, checked by conservation: with error
// feedback, what a call takes out of a rank's accumulated gradient (acc = residual before +
// gradient; sent = acc - residual after) summed over the ranks is the result (divided by the
// rank count for avg). That holds for every method, Ok-Topk included, whatever it selected.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "calls.hpp"

namespace sparcoll::soak {

namespace {

CompressedTensor tensor(std::uint64_t id, std::size_t count, CompressionAlgo algo, ValueFormat values, std::size_t k,
                        double density) {
  CompressedTensor t;
  t.id = id;
  t.count = count;
  t.compression.algo = algo;
  t.compression.values = values;
  t.compression.k = k;
  t.compression.density = density;
  return t;
}

std::string wrong(const Call& call, const std::string& what) { return "wrong result: " + call.describe() + ": " + what; }

}  // namespace

std::vector<CompressedTensor> compressed_tensors(std::size_t max_bytes) {
  using A = CompressionAlgo;
  using V = ValueFormat;
  std::vector<CompressedTensor> t = {
      tensor(101, 65537, A::oktopk, V::f32, 0, 0.01),
      tensor(102, 20000, A::oktopk, V::f32, 50, 0),
      tensor(103, 7, A::oktopk, V::f32, 1, 0),
      tensor(104, 4099, A::topk_allgather, V::f32, 0, 0.01),
      tensor(105, 65537, A::topk_allgather, V::f16, 0, 0.02),
      tensor(106, 1283, A::topk_allgather, V::bf16, 7, 0),
      tensor(107, 262147, A::topk_allgather, V::qsgd4, 0, 0.001),
      tensor(108, 65537, A::topk_dense, V::f32, 0, 0.01),
      tensor(109, 4099, A::topk_dense, V::f32, 41, 0),
      tensor(110, 262147, A::none, V::f16, 0, 0),
      tensor(111, 4099, A::none, V::bf16, 0, 0),
      tensor(112, 65537, A::none, V::qsgd2, 0, 0),
      tensor(113, 1, A::none, V::qsgd8, 0, 0),
      tensor(114, 1283, A::none, V::f32, 0, 0),
      tensor(115, 257, A::topk_allgather, V::f32, 257, 0),
  };
  t[1].compression.op = ReduceOp::sum;
  t[1].compression.tau = 4;  // exact thresholds and repartitions often, estimates in between
  t[1].compression.tau_prime = 8;
  t[6].compression.seed = 5;
  t[8].compression.dense_algo = Algorithm::butterfly;
  t[9].compression.op = ReduceOp::sum;
  // Without error feedback nothing tells what was sent: these two are lossless (every value,
  // fp32), so what was sent is the gradient itself.
  t[13].compression.error_feedback = false;
  t[14].compression.error_feedback = false;
  const std::size_t cap = std::max<std::size_t>(max_bytes / sizeof(float), 1);
  for (CompressedTensor& x : t) {
    x.count = std::min(x.count, cap);
    x.compression.k = std::min(x.compression.k, x.count);
  }
  return t;
}

void start_compressed(Context& ctx, Slot& s, const Call& c, const CompressedTensor& t) {
  Call data = c;
  data.dtype = DataType::f32;
  perf::generate(workload_of(ctx, data, t.count), ctx.rank, &s.send);
  if (t.compression.error_feedback) {
    const std::vector<float> residual = ctx.comm.compression_residual(t.id);
    s.before.assign(residual.begin(), residual.end());  // keeps the slot's capacity
  }
  s.recv.assign(t.count * sizeof(float), std::byte{0x7b});
  const auto* grad = reinterpret_cast<const float*>(s.send.data());
  auto* out = reinterpret_cast<float*>(s.recv.data());
  if (c.nonblocking) s.request = ctx.comm.iallreduce_compressed(t.id, grad, out, t.count, t.compression);
  else ctx.comm.allreduce_compressed(t.id, grad, out, t.count, t.compression);
}

std::string finish_compressed(Context& ctx, Slot& s, const Call& c, const CompressedTensor& t, bool check) {
  if (s.request.valid()) s.request.wait();
  s.request = Request();
  const std::size_t n = t.count;
  ctx.fold(s.recv.data(), n * sizeof(float));
  if (!check) return std::string();

  // What this rank sent, as fp32, in s.want.
  s.want.resize(n * sizeof(float));
  auto* sent = reinterpret_cast<float*>(s.want.data());
  const auto* grad = reinterpret_cast<const float*>(s.send.data());
  if (t.compression.error_feedback) {
    const std::vector<float> after = ctx.comm.compression_residual(t.id);
    if (after.size() != n) return wrong(c, "residual of " + std::to_string(after.size()) + " values");
    if (s.before.empty()) s.before.assign(n, 0.0f);
    for (std::size_t i = 0; i < n; ++i) sent[i] = (s.before[i] + grad[i]) - after[i];
  } else {
    std::memcpy(sent, grad, n * sizeof(float));
  }
  s.scratch.resize(n * sizeof(float) * static_cast<std::size_t>(ctx.world));
  ctx.comm.allgather(sent, s.scratch.data(), n, DataType::f32);
  const auto* all = reinterpret_cast<const float*>(s.scratch.data());
  const auto* out = reinterpret_cast<const float*>(s.recv.data());
  const double scale = t.compression.op == ReduceOp::avg ? 1.0 / ctx.world : 1.0;
  for (std::size_t i = 0; i < n; ++i) {
    double want = 0, magnitude = 0;
    for (int r = 0; r < ctx.world; ++r) {
      const double v = all[static_cast<std::size_t>(r) * n + i];
      want += v;
      magnitude += std::fabs(v);
    }
    want *= scale;
    // fp32 sums of the ranks' values in any order and one division for avg; sent = acc - residual
    // is itself rounded once when the values are lossy (QSGD).
    const double bound = 2 * (ctx.world + 2) * std::ldexp(1.0, -24) * magnitude * scale;
    if (!(std::fabs(out[i] - want) <= bound))
      return wrong(c, "element " + std::to_string(i) + ": got " + std::to_string(out[i]) + ", the ranks sent " +
                          std::to_string(want) + " in all");
  }
  return std::string();
}

}  // namespace sparcoll::soak
