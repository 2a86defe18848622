// The calling-thread half of the compressed allreduce: argument checks (so that bad input fails
// the call on every rank instead of hanging: CollOp::invalid), the per-tensor-id state, the
// QSGD seed; the algorithms run on the collective thread (src/algo/oktopk.cpp, topk_ef.cpp).
#include <cmath>
#include <random>
#include <string>

#include "api/communicator_impl.hpp"

namespace sparcoll::detail {

namespace {

std::string check_compression(const float* grad, const float* out, std::size_t count, const Compression& c,
                              std::size_t* k) {
  const auto algo = static_cast<std::uint8_t>(c.algo), values = static_cast<std::uint8_t>(c.values);
  if (algo > static_cast<std::uint8_t>(CompressionAlgo::none))
    return "algo " + std::to_string(algo) + " is not one of oktopk, topk_allgather, topk_dense, none";
  if (values > static_cast<std::uint8_t>(ValueFormat::qsgd8))
    return "values " + std::to_string(values) + " is not one of f32, f16, bf16, qsgd2, qsgd4, qsgd8";
  if (c.op != ReduceOp::sum && c.op != ReduceOp::avg)
    return "op " + std::string(reduce_op_name(c.op)) + ": a compressed allreduce sums (sum) or averages (avg)";
  if (count == 0) return "count is 0 (a compressed allreduce needs at least one element)";
  if (count > 0xffffffffull) return "count " + std::to_string(count) + " exceeds 2^32 - 1 (indices are 32-bit)";
  if (grad == nullptr) return "grad is null with count " + std::to_string(count);
  if (out == nullptr) return "out is null with count " + std::to_string(count);
  if (reinterpret_cast<std::uintptr_t>(grad) % 4 || reinterpret_cast<std::uintptr_t>(out) % 4)
    return "grad and out must be aligned to 4-byte fp32 elements";
  if (c.algo == CompressionAlgo::none) {
    *k = count;
  } else if (c.k != 0) {
    *k = c.k;
  } else {
    if (!(c.density > 0.0 && c.density <= 1.0))
      return "k is 0 and density " + std::to_string(c.density) + " is not in (0, 1]: k must be in [1, count = " +
             std::to_string(count) + "]";
    *k = std::max<std::size_t>(1, static_cast<std::size_t>(std::floor(c.density * static_cast<double>(count))));
  }
  if (*k == 0 || *k > count)
    return "k = " + std::to_string(*k) + " is not in [1, count = " + std::to_string(count) + "]";
  if (c.algo == CompressionAlgo::oktopk && c.values != ValueFormat::f32)
    return "oktopk sends fp32 values (its sums are reduced by region owners); use values f32";
  if (c.algo == CompressionAlgo::topk_dense && c.values != ValueFormat::f32)
    return "topk_dense sends fp32 partial sums through a dense allreduce; use values f32";
  if (c.algo == CompressionAlgo::topk_dense && c.dense_algo != Algorithm::ring && c.dense_algo != Algorithm::butterfly)
    return "dense_algo " + std::string(algorithm_name(c.dense_algo)) + " is not ring or butterfly";
  if (c.algo == CompressionAlgo::oktopk && (c.tau == 0 || c.tau_prime == 0))
    return "tau = " + std::to_string(c.tau) + " and tau_prime = " + std::to_string(c.tau_prime) + " must be >= 1";
  if (c.values >= ValueFormat::qsgd2 && c.qsgd_bucket == 0) return "qsgd_bucket is 0";
  return std::string();
}

}  // namespace

Status CommunicatorImpl::iallreduce_compressed(std::uint64_t tensor_id, const float* grad, float* out,
                                               std::size_t count, const Compression& c,
                                               std::shared_ptr<RequestState>* out_request) {
  if (Status s = check_usable("allreduce_compressed"); !s.ok()) return s;
  coll::CollOp& op = executor_->next_slot();
  op.kind = coll::CollKind::compressed_allreduce;
  op.algo = Algorithm::from_options;
  op.count = 0;
  algo::CompressedCall& call = op.compressed;
  call = algo::CompressedCall{};
  std::size_t k = 0;
  std::string problem = check_compression(grad, out, count, c, &k);
  algo::CompressedTensor* tensor = nullptr;
  if (problem.empty()) {
    auto it = tensors_.find(tensor_id);
    if (it != tensors_.end() && it->second->n != count) {
      problem = "tensor id " + std::to_string(tensor_id) + " was used with " + std::to_string(it->second->n) +
                " elements and now with " + std::to_string(count) + "; use another id for another tensor";
    } else if (it == tensors_.end()) {
      auto t = std::make_unique<algo::CompressedTensor>();
      t->id = tensor_id;
      t->n = count;
      tensor = t.get();
      tensors_.emplace(tensor_id, std::move(t));
    } else {
      tensor = it->second.get();
    }
  }
  if (problem.empty()) {
    if (random_seed_ == 0) random_seed_ = (std::uint64_t{std::random_device{}()} << 32) | std::random_device{}() | 1;
    call.tensor = tensor;
    call.grad = grad;
    call.out = out;
    call.n = count;
    call.k = k;
    call.c = c;
    call.seed = c.seed.value_or(random_seed_);
    call.ring_segment_bytes = options_.ring_segment_bytes;
  }
  return submit(op, "allreduce_compressed", problem, out_request, " (tensor id " + std::to_string(tensor_id) + ")");
}

std::vector<float> CommunicatorImpl::compression_residual(std::uint64_t tensor_id) const {
  auto it = tensors_.find(tensor_id);
  if (it == tensors_.end()) return {};
  std::size_t n = 0;
  const float* r = it->second->residual.residual(tensor_id, &n);
  return r ? std::vector<float>(r, r + n) : std::vector<float>(it->second->n, 0.0f);
}

}  // namespace sparcoll::detail
