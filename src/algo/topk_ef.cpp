// Top-k with error feedback for any exchange (the DGC / Quantized TopK SGD pattern) and
// low-precision values (docs/algorithms.md):
//
//   acc = grad + residual; exact top-k of |acc| (k entries, ties to the lowest indices);
//   topk_allgather: every rank's (indices, encoded values) to every other rank in one step, each
//                   rank decodes and adds them in rank order (same bytes in, same order: the same
//                   result on every rank);
//   topk_dense:     the sparsified dense vector through ring or butterfly;
//   none:           no selection, the encoded full vector allgathered (QSGD's setting).
//   residual = acc - what was sent, as decoded: exactly 0 at the sent entries for fp32 values;
//   with lossy values the rounding error stays in the residual too (one fp32 subtraction).
#include <algorithm>
#include <cstring>
#include <string>

#include "algo/compress/counter_rng.hpp"
#include "algo/compress/half_pack.hpp"
#include "algo/compress/qsgd.hpp"
#include "algo/compressed.hpp"

namespace sparcoll::algo {

namespace {

unsigned qsgd_bits(ValueFormat f) {
  switch (f) {
    case ValueFormat::qsgd2: return 2;
    case ValueFormat::qsgd4: return 4;
    case ValueFormat::qsgd8: return 8;
    default: return 0;
  }
}

// Bytes of m values in format f.
Status value_bytes(const CompressedCall& call, std::size_t m, std::size_t* bytes) {
  switch (call.c.values) {
    case ValueFormat::f32: *bytes = m * 4; return Status();
    case ValueFormat::f16:
    case ValueFormat::bf16: *bytes = m * 2; return Status();
    default: return compress::qsgd_encoded_bytes(m, qsgd_bits(call.c.values), call.c.qsgd_bucket, bytes);
  }
}

compress::HalfFormat half_format(ValueFormat f) {
  return f == ValueFormat::f16 ? compress::HalfFormat::f16 : compress::HalfFormat::bf16;
}

// dst[i] += decode(values i), i < m.
Status decode_add(const CompressedCall& call, const std::byte* enc, std::size_t bytes, std::size_t m, float* dst) {
  switch (call.c.values) {
    case ValueFormat::f32: {
      const float* v = reinterpret_cast<const float*>(enc);
      for (std::size_t i = 0; i < m; ++i) dst[i] += v[i];
      return Status();
    }
    case ValueFormat::f16:
    case ValueFormat::bf16:
      compress::half_unpack_add(half_format(call.c.values), reinterpret_cast<const std::uint16_t*>(enc), m, dst);
      return Status();
    default: return compress::qsgd_decode_add(enc, bytes, m, qsgd_bits(call.c.values), call.c.qsgd_bucket, dst);
  }
}

Status encode(const CompressedCall& call, const float* v, std::size_t m, std::uint64_t seed, std::byte* out,
              std::size_t bytes) {
  switch (call.c.values) {
    case ValueFormat::f32: std::memcpy(out, v, m * 4); return Status();
    case ValueFormat::f16:
    case ValueFormat::bf16:
      compress::half_pack(half_format(call.c.values), v, m, reinterpret_cast<std::uint16_t*>(out));
      return Status();
    default: return compress::qsgd_encode(v, m, qsgd_bits(call.c.values), call.c.qsgd_bucket, seed, out, bytes);
  }
}

}  // namespace

Task agree_call(p2p::Peers& peers, std::uint32_t tag, CompressedCall& call, CompressScratch& s) {
  const std::uint32_t P = peers.size(), me = peers.rank();
  if (P == 1) co_return Status();
  constexpr std::size_t W = 7;
  const std::uint64_t mine[W] = {call.n, call.k, static_cast<std::uint64_t>(call.c.algo),
                                 static_cast<std::uint64_t>(call.c.values), call.c.tau, call.c.tau_prime,
                                 call.tensor->calls};
  static constexpr const char* kNames[W] = {"count", "k", "algo", "values", "tau", "tau_prime", "calls on this tensor id"};
  s.counts.resize(std::size_t{P} * W);
  std::memcpy(s.counts.data() + std::size_t{me} * W, mine, sizeof mine);
  for (std::uint32_t p = 0; p < P; ++p) {
    if (p == me) continue;
    peers.send(p, tag, s.counts.data() + std::size_t{me} * W, sizeof mine);
    peers.recv(p, tag, s.counts.data() + std::size_t{p} * W, sizeof mine);
  }
  call.control_words += std::uint64_t{P - 1} * W * 2;
  if (Status st = co_await peers.wait(); !st.ok()) co_return st;
  for (std::uint32_t p = 0; p < P; ++p)
    for (std::size_t w = 0; w < W; ++w)
      if (s.counts[p * W + w] != mine[w])
        co_return Status(ErrorCode::mismatch, "compressed allreduce: " + std::string(kNames[w]) + " is " +
                                                  std::to_string(s.counts[p * W + w]) + " on rank " +
                                                  std::to_string(p) + " and " + std::to_string(mine[w]) +
                                                  " on rank " + std::to_string(me));
  co_return Status();
}

void post_all_to_all(p2p::Peers& peers, std::uint32_t tag, const void* data, std::size_t bytes,
                     std::vector<std::vector<std::byte>>& rx, std::size_t max_bytes) {
  rx.resize(peers.size());
  for (std::uint32_t p = 0; p < peers.size(); ++p) {
    if (p == peers.rank()) continue;
    peers.send(p, tag, data, bytes);
    peers.recv_any(p, tag, &rx[p], max_bytes);
  }
}

namespace {

// topk_dense: the top-k scattered into a zero tensor, which a dense allreduce sums.
Task topk_dense_allreduce(p2p::Peers& peers, CompressedCall& call, CompressScratch& s, Scratch& dense_scratch,
                          const std::uint32_t* idx, const float* val) {
  CompressedTensor& t = *call.tensor;
  const std::size_t n = call.n, k = call.k;
  s.values.resize(n);
  std::fill(s.values.begin(), s.values.end(), 0.0f);
  for (std::size_t i = 0; i < k; ++i) s.values[idx[i]] = val[i];
  if (call.c.error_feedback) {
    if (Status st = t.residual.keep_unsent(t.id, idx, k); !st.ok()) co_return st;
  } else {
    t.residual.clear(t.id);
  }
  // grad is consumed (acc is the residual buffer, values is scratch): out may alias grad.
  Status st;
  if (call.c.dense_algo == Algorithm::butterfly)
    st = co_await butterfly_allreduce(peers, s.values.data(), call.out, n, DataType::f32, call.c.op, dense_scratch);
  else
    st = co_await ring_allreduce(peers, s.values.data(), call.out, n, DataType::f32, call.c.op,
                                 call.ring_segment_bytes, dense_scratch);
  call.payload_words = peers.bytes_sent() / 4;  // the dense algorithm's traffic, headers included
  ++t.calls;
  co_return st;
}

// Error feedback: acc keeps acc - decode(own message) at the sent entries (the same decode the
// others do), so lossy values carry their rounding into the next call.
Status keep_what_was_not_sent(CompressedCall& call, CompressScratch& s, float* acc, const std::uint32_t* idx,
                              std::size_t m, std::size_t ibytes, std::size_t vbytes) {
  CompressedTensor& t = *call.tensor;
  const bool sparse = idx != nullptr;
  s.values.resize(m);
  std::fill(s.values.begin(), s.values.end(), 0.0f);
  if (Status st = decode_add(call, s.tx.data() + ibytes, vbytes, m, s.values.data()); !st.ok()) return st;
  if (!call.c.error_feedback) return Status();
  if (call.c.values == ValueFormat::f32) {
    if (sparse) return t.residual.keep_unsent(t.id, idx, call.k);
    t.residual.clear(t.id);
    return Status();
  }
  for (std::size_t i = 0; i < m; ++i) {
    const std::size_t j = sparse ? idx[i] : i;
    acc[j] = acc[j] - s.values[i];
  }
  return Status();
}

// out = every rank's message decoded and added in rank order (every rank adds the same values in
// the same order); a message of another size or an index out of range is a mismatch.
Status merge_in_rank_order(p2p::Peers& peers, CompressedCall& call, CompressScratch& s, bool sparse, std::size_t m,
                           std::size_t ibytes, std::size_t vbytes) {
  const std::uint32_t P = peers.size(), me = peers.rank();
  const std::size_t n = call.n, bytes = ibytes + vbytes;
  std::fill(call.out, call.out + n, 0.0f);
  std::vector<float>& dec = s.values;  // reused: own decoded values were consumed already
  for (std::uint32_t r = 0; r < P; ++r) {
    const std::byte* msg = r == me ? s.tx.data() : s.rx_a[r].data();
    if (r != me && s.rx_a[r].size() != bytes)
      return Status(ErrorCode::mismatch, "compressed allreduce: rank " + std::to_string(r) + " sent " +
                                             std::to_string(s.rx_a[r].size()) + " bytes, this rank " +
                                             std::to_string(bytes) + " (count, k or values differ across ranks?)");
    if (!sparse) {
      if (Status st = decode_add(call, msg, vbytes, m, call.out); !st.ok()) return st;
      continue;
    }
    std::fill(dec.begin(), dec.end(), 0.0f);
    if (Status st = decode_add(call, msg + ibytes, vbytes, m, dec.data()); !st.ok()) return st;
    const auto* ri = reinterpret_cast<const std::uint32_t*>(msg);
    for (std::size_t i = 0; i < m; ++i) {
      if (ri[i] >= n)
        return Status(ErrorCode::mismatch, "compressed allreduce: rank " + std::to_string(r) + " sent index " +
                                               std::to_string(ri[i]) + " of a " + std::to_string(n) +
                                               "-element tensor (count differs across ranks?)");
      call.out[ri[i]] += dec[i];
    }
  }
  if (call.c.op == ReduceOp::avg)
    for (std::size_t i = 0; i < n; ++i) call.out[i] /= static_cast<float>(P);
  return Status();
}

}  // namespace

Task topk_ef_allreduce(p2p::Peers& peers, CompressedCall& call, CompressScratch& s, Scratch& dense_scratch) {
  CompressedTensor& t = *call.tensor;
  const std::uint32_t P = peers.size(), me = peers.rank();
  const std::size_t n = call.n, k = call.k;
  const bool sparse = call.c.algo != CompressionAlgo::none;
  if (Status st = co_await agree_call(peers, 1000, call, s); !st.ok()) co_return st;

  float* acc = nullptr;
  if (Status st = t.residual.accumulate(t.id, call.grad, n, &acc); !st.ok()) co_return st;
  const std::uint32_t* idx = nullptr;
  const float* val = acc;  // algo none: every value, in order
  if (sparse) {
    t.sel_idx.resize(k);
    t.sel_val.resize(k);
    if (Status st = compress::exact_topk(acc, n, k, t.sel_idx.data(), t.sel_val.data(), s.topk); !st.ok()) co_return st;
    idx = t.sel_idx.data();
    val = t.sel_val.data();
  }
  if (call.c.algo == CompressionAlgo::topk_dense)
    co_return co_await topk_dense_allreduce(peers, call, s, dense_scratch, idx, val);
  const std::size_t m = sparse ? k : n;

  // This rank's message: [m u32 indices (sparse only)][m encoded values].
  std::size_t vbytes = 0;
  if (Status st = value_bytes(call, m, &vbytes); !st.ok()) co_return st;
  const std::size_t ibytes = sparse ? m * 4 : 0, bytes = ibytes + vbytes;
  s.tx.resize(bytes);
  if (sparse) std::memcpy(s.tx.data(), idx, ibytes);
  // The draw depends on (seed, tensor, call, rank): reproducible with a fixed seed, independent
  // across ranks and calls.
  const std::uint64_t seed =
      compress::splitmix64(call.seed ^ compress::splitmix64(t.id ^ compress::splitmix64(t.calls * 65536 + me)));
  if (Status st = encode(call, val, m, seed, s.tx.data() + ibytes, vbytes); !st.ok()) co_return st;
  call.payload_words = std::uint64_t{P - 1} * ((bytes + 3) / 4);
  if (P > 1) post_all_to_all(peers, 0, s.tx.data(), bytes, s.rx_a, bytes);

  // While the messages travel: the residual (out may alias grad, but accumulate read grad).
  if (Status st = keep_what_was_not_sent(call, s, acc, idx, m, ibytes, vbytes); !st.ok()) co_return st;
  if (P > 1)
    if (Status st = co_await peers.wait(); !st.ok()) co_return st;
  if (!call.c.error_feedback) t.residual.clear(t.id);
  if (Status st = merge_in_rank_order(peers, call, s, sparse, m, ibytes, vbytes); !st.ok()) co_return st;
  ++t.calls;
  co_return Status();
}

}  // namespace sparcoll::algo
