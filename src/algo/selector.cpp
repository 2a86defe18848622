// Cost terms per rank, with n ranks, N elements of e bytes, fp32/i32 accumulators of 4 bytes,
// blocks of b elements, block density d_b and element density d_e (means over ranks). Where the
// supports of the ranks overlap is unknown, so the union is estimated as for independent random
// supports: u = 1 - (1 - d)^n (exact for OmniReduce's generator, pessimistic for clustered real
// gradients, whose supports overlap more).
//
//   ring        2(n-1)α + (n-1)/n N (4 + e) β          partial sums as fp32, the result as e
//   butterfly   2 log2(p) α + (p-1)/p N (4 + e) β      p = largest power of two <= n, plus a
//                                                      fold and unfold of N (4 + e) when p < n
//   block_sparse  2α per window round + (n-1)/n B (b e + 8) (d_b + u_b) β   (co-located: each
//               rank sends its blocks and its aggregated results; dedicated: d_b out, u_b in)
//   ssar_split  2(n-1)α + (n-1)/n N 8 (d_e + u_e) β    (index + fp32 value per non-zero)
//   dsar_split  2(n-1)α + (n-1)/n N (8 d_e + min(8 u_e, e)) β
//   ssar_rd     Σ_k (α + N (1 - (1 - d_e)^(2^k)) 8 β) over log2(p) rounds, plus the fold
#include "algo/selector.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

namespace sparcoll::algo {

namespace {

double union_density(double d, std::uint32_t n) {
  d = std::clamp(d, 0.0, 1.0);
  return std::max(d, 1.0 - std::pow(1.0 - d, static_cast<double>(n)));
}

}  // namespace

double predict_us(Algorithm algo, const SelectionInput& in, const LinkModel& link) {
  const double n = in.ranks, N = static_cast<double>(in.count), e = static_cast<double>(dtype_size(in.dtype));
  const double a = link.alpha_us, b = link.beta_us_per_byte;
  if (in.ranks <= 1) return algo == Algorithm::block_sparse ? 0.0 : 1e-3;  // a local copy either way
  const double share = (n - 1) / n;
  const auto p = static_cast<double>(std::bit_floor(in.ranks));
  const bool folded = p < n;
  const double fold = folded ? 2 * a + N * (4 + e) * b : 0.0;
  const double sparse_pair = 8.0;
  const bool sparse_ok = in.sparse_algorithms && (in.op == ReduceOp::sum || in.op == ReduceOp::avg);
  switch (algo) {
    case Algorithm::ring:
      return 2 * (n - 1) * a + share * N * (4 + e) * b;
    case Algorithm::butterfly:
      return 2 * std::log2(p) * a + (p - 1) / p * N * (4 + e) * b + fold;
    case Algorithm::block_sparse: {
      const double blocks = std::ceil(N / in.block_elems);
      const double db = std::clamp(in.block_density, 0.0, 1.0), ub = union_density(db, in.ranks);
      const double block_bytes = in.block_elems * e + 8;
      const double rounds = 1 + std::ceil(ub * blocks / (double{in.lanes} * in.fusion));
      const double bytes = in.dedicated_aggregators ? std::max(db, ub) * blocks * block_bytes
                                                    : share * blocks * block_bytes * (db + ub);
      return 2 * a * rounds + bytes * b;
    }
    case Algorithm::ssar_split_allgather:
    case Algorithm::dsar_split_allgather: {
      if (!sparse_ok) return std::numeric_limits<double>::infinity();
      const double de = std::clamp(in.elem_density, 0.0, 1.0), ue = union_density(de, in.ranks);
      const double second = algo == Algorithm::ssar_split_allgather ? sparse_pair * ue : std::min(sparse_pair * ue, e);
      return 2 * (n - 1) * a + share * N * (sparse_pair * de + second) * b;
    }
    case Algorithm::ssar_recursive_doubling: {
      if (!sparse_ok) return std::numeric_limits<double>::infinity();
      const double de = std::clamp(in.elem_density, 0.0, 1.0);
      double t = 0;
      for (double group = 1; group < p; group *= 2)
        t += a + N * (1.0 - std::pow(1.0 - de, group)) * sparse_pair * b;
      return t + (folded ? 2 * a + 2 * N * sparse_pair * de * b : 0.0);
    }
    default:
      return std::numeric_limits<double>::infinity();
  }
}

Algorithm select_allreduce(const SelectionInput& in, const LinkModel& link, std::array<double, 6>* predicted) {
  Algorithm best = Algorithm::block_sparse;
  double best_us = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < kCandidates.size(); ++i) {
    const double t = predict_us(kCandidates[i], in, link);
    if (predicted) (*predicted)[i] = t;
    if (t < best_us) {
      best_us = t;
      best = kCandidates[i];
    }
  }
  return best;
}

}  // namespace sparcoll::algo
