// Ok-Topk sparse allreduce (Li & Hoefler, PPoPP'22; research notes §3.2), on p2p::Peers.
//
//   0. acc = grad + residual (the residual buffer itself).
//   1. local selection: |acc| >= th_l, th_l exact every tau calls and adapted in between
//      (ThresholdEstimator); at most k entries, so the volume bound below holds on every call.
//   2. every tau' calls, region boundaries: each rank proposes the P-1 indices that split its
//      selected indices into P equal parts; the boundaries are the rank-order means, so every
//      rank owns a region holding about the same number of selected entries.
//   3. split and reduce: the selected entries of region j go to rank j, which sums them into a
//      dense region accumulator in rank order.
//   4. global selection: the owner keeps |sum| >= th_g. th_g is exact every tau calls (a
//      distributed bisection over the float bits: the smallest threshold at which at most k
//      entries survive over all regions), reused in between, raised within the call while more
//      than k survive. Every call agrees on the per-region counts (and checks n and k).
//   5. balance and allgather: the survivors, concatenated in region order (which is index
//      order), are rebalanced into P equal slots and then allgathered.
//   6. residual: entries this rank selected that survived globally are cleared; everything
//      else (unselected, or selected but dropped by the global selection) stays, as in the
//      paper's code.
//
// Volume per rank (words: an index or a value): step 3 sends at most 2k, step 5 at most
// 2k(P-1)/P for the rebalancing and 2k(P-1)/P for the allgather in the worst case, so the
// payload is below 6k words; counted in call.payload_words. Boundaries, counts and the
// bisection are O(P) words per exchange (call.control_words).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "algo/compress/select_above.hpp"
#include "algo/compressed.hpp"

namespace sparcoll::algo {

namespace {

constexpr float kGlobalLower = 1.01f;  // th_g adaptation (LSTM setting of the paper's code)
constexpr float kGlobalRaise = 1.03f;  // raise within a call while more than k survive
constexpr int kGlobalRetries = 4;      // raises before an exact bisection

Status mismatch(std::string what) { return Status(ErrorCode::mismatch, "oktopk: " + std::move(what)); }

// Sends this rank's `words` u64 to every peer and gathers everyone's into counts[r * words ...].
Task exchange_u64(p2p::Peers& peers, std::uint32_t tag, const std::uint64_t* mine, std::size_t words,
                  CompressScratch& s, CompressedCall& call) {
  const std::uint32_t P = peers.size(), me = peers.rank();
  s.counts.resize(std::size_t{P} * words);
  // One rank exchanges P - 1 = 0 boundaries: counts is then empty and its data() may be null,
  // which memcpy must not get even for 0 bytes (undefined behaviour, reported by UBSan).
  if (words != 0) std::memcpy(s.counts.data() + std::size_t{me} * words, mine, words * 8);
  if (P == 1) co_return Status();
  for (std::uint32_t p = 0; p < P; ++p) {
    if (p == me) continue;
    peers.send(p, tag, s.counts.data() + std::size_t{me} * words, words * 8);
    peers.recv(p, tag, s.counts.data() + std::size_t{p} * words, words * 8);
  }
  call.control_words += std::uint64_t{P - 1} * words * 2;  // a u64 is two words
  co_return co_await peers.wait();
}

// The number of entries with |v| >= threshold over every rank's region (exchanged).
Task global_count(p2p::Peers& peers, std::uint32_t& tag, const float* region, std::size_t len, float threshold,
                  CompressScratch& s, CompressedCall& call, std::uint64_t* total) {
  std::size_t c = 0;
  if (Status st = compress::count_above(region, len, threshold, &c); !st.ok()) co_return st;
  const std::uint64_t mine = c;
  if (Status st = co_await exchange_u64(peers, tag++, &mine, 1, s, call); !st.ok()) co_return st;
  *total = 0;
  for (std::uint64_t v : s.counts) *total += v;
  co_return Status();
}

// Exact global threshold: the smallest positive float t with at most k entries |v| >= t over all
// regions (so exactly the top-k, fewer only when entries tie at the k-th magnitude). Bisection
// over the bit patterns of positive floats (ordered like the floats): 31 count exchanges.
Task exact_global_threshold(p2p::Peers& peers, std::uint32_t& tag, const float* region, std::size_t len,
                            std::size_t k, CompressScratch& s, CompressedCall& call, float* out) {
  std::uint32_t lo = 1, hi = 0x7f800000u;  // denorm_min .. +inf
  while (lo < hi) {
    const std::uint32_t mid = lo + (hi - lo) / 2;
    float t;
    std::memcpy(&t, &mid, 4);
    std::uint64_t total = 0;
    if (Status st = co_await global_count(peers, tag, region, len, t, s, call, &total); !st.ok()) co_return st;
    if (total <= k)
      hi = mid;
    else
      lo = mid + 1;
  }
  std::memcpy(out, &lo, 4);
  co_return Status();
}

}  // namespace

namespace {

// One call's state as it goes through the steps below.
struct OkTopk {
  p2p::Peers& peers;
  CompressedCall& call;
  CompressScratch& s;
  CompressedTensor& t;
  std::uint32_t P = 1, me = 0;
  std::size_t n = 0, k = 0;
  std::uint32_t tag = 0;  // the next message tag; every rank advances it alike
  // 1. this rank's selection: sel entries, indices increasing.
  const std::uint32_t* idx = nullptr;
  const float* val = nullptr;
  std::size_t sel = 0;
  // 3. this rank's region [rb, re) of the index space, reduced over every rank.
  std::uint32_t rb = 0, re = 0;
  std::size_t len = 0;
  float* region = nullptr;
  // 4. the global survivors: `total` of them, region r's at [offset_of[r], offset_of[r + 1]).
  std::uint64_t total = 0;
  std::size_t offset_of[257] = {};
};

// 1. local selection, at most k entries (capacity k: the estimator raises, then falls back on
// the exact top-k, when more qualify).
Status select_locally(OkTopk& o, const float* acc) {
  CompressedTensor& t = o.t;
  const std::size_t k = o.k;
  if (t.local_k != k || t.local_tau != o.call.c.tau) {
    compress::ThresholdEstimatorConfig cfg;
    cfg.k = k;
    cfg.recompute_every = o.call.c.tau;
    cfg.band_low = 0.75;
    cfg.band_high = 1.0;  // never above k: the capacity already enforces it
    if (Status st = compress::ThresholdEstimator::create(cfg, &t.local); !st.ok()) return st;
    t.local_k = k;
    t.local_tau = o.call.c.tau;
  }
  t.sel_idx.resize(k);
  t.sel_val.resize(k);
  if (Status st = t.local.select(acc, o.n, t.sel_idx.data(), t.sel_val.data(), k, &o.sel, o.s.topk); !st.ok()) return st;
  o.idx = t.sel_idx.data();
  o.val = t.sel_val.data();
  return Status();
}

// 2. region boundaries, every tau' calls (and whenever P changed, i.e. the first call).
Task agree_boundaries(OkTopk& o) {
  CompressedTensor& t = o.t;
  const std::uint32_t P = o.P;
  const std::size_t n = o.n;
  if (t.bounds.size() != std::size_t{P} + 1 || t.bounds_age >= o.call.c.tau_prime) {
    std::uint64_t proposal[256];
    for (std::uint32_t j = 1; j < P; ++j)
      proposal[j - 1] = o.sel >= P ? o.idx[j * (o.sel / P)] : (n * j) / P;  // too few to split: equal widths
    if (Status st = co_await exchange_u64(o.peers, o.tag++, proposal, P - 1, o.s, o.call); !st.ok()) co_return st;
    t.bounds.assign(std::size_t{P} + 1, 0);
    t.bounds[P] = static_cast<std::uint32_t>(n);
    for (std::uint32_t j = 1; j < P; ++j) {
      std::uint64_t sum = 0;
      for (std::uint32_t r = 0; r < P; ++r) sum += std::min<std::uint64_t>(o.s.counts[std::size_t{r} * (P - 1) + j - 1], n);
      t.bounds[j] = std::max(t.bounds[j - 1], static_cast<std::uint32_t>(sum / P));
    }
    t.bounds_age = 0;
  } else if (P > 1) {
    ++o.tag;  // keep tags aligned with the ranks that repartition (they all do, on the same calls)
  }
  ++t.bounds_age;
  co_return Status();
}

// 3. split and reduce: region j's entries (a contiguous slice: indices are sorted) go to rank j,
// which sums every rank's into its region in rank order.
Task reduce_regions(OkTopk& o) {
  CompressScratch& s = o.s;
  const std::uint32_t P = o.P, me = o.me;
  s.rx_a.resize(P);
  s.rx_b.resize(P);
  const std::uint32_t tag_split = o.tag;
  o.tag += 2;
  std::size_t first_of[257];
  for (std::uint32_t j = 0; j <= P; ++j)
    first_of[j] = j == P ? o.sel : static_cast<std::size_t>(std::lower_bound(o.idx, o.idx + o.sel, o.t.bounds[j]) - o.idx);
  for (std::uint32_t j = 0; j < P; ++j) {
    if (j == me) continue;
    const std::size_t c = first_of[j + 1] - first_of[j];
    o.peers.send(j, tag_split, o.idx + first_of[j], c * 4);
    o.peers.send(j, tag_split + 1, o.val + first_of[j], c * 4);
    o.peers.recv_any(j, tag_split, &s.rx_a[j], o.k * 4);
    o.peers.recv_any(j, tag_split + 1, &s.rx_b[j], o.k * 4);
    o.call.payload_words += 2 * c;
  }
  if (P > 1)
    if (Status st = co_await o.peers.wait(); !st.ok()) co_return st;
  o.rb = o.t.bounds[me];
  o.re = o.t.bounds[me + 1];
  o.len = o.re - o.rb;
  s.region.resize(o.len);
  std::fill(s.region.begin(), s.region.end(), 0.0f);
  o.region = s.region.data();
  for (std::uint32_t p = 0; p < P; ++p) {  // rank order: the same sums on every run
    const std::uint32_t* pi = o.idx + first_of[me];
    const float* pv = o.val + first_of[me];
    std::size_t c = first_of[me + 1] - first_of[me];
    if (p != me) {
      if (s.rx_a[p].size() != s.rx_b[p].size() || s.rx_a[p].size() % 4 != 0)
        co_return mismatch("rank " + std::to_string(p) + " sent " + std::to_string(s.rx_a[p].size()) +
                           " index bytes and " + std::to_string(s.rx_b[p].size()) + " value bytes for region " +
                           std::to_string(me));
      pi = reinterpret_cast<const std::uint32_t*>(s.rx_a[p].data());
      pv = reinterpret_cast<const float*>(s.rx_b[p].data());
      c = s.rx_a[p].size() / 4;
    }
    for (std::size_t i = 0; i < c; ++i) {
      if (pi[i] < o.rb || pi[i] >= o.re)
        co_return mismatch("rank " + std::to_string(p) + " sent index " + std::to_string(pi[i]) + " for region " +
                           std::to_string(me) + " = [" + std::to_string(o.rb) + ", " + std::to_string(o.re) +
                           ") (count, k or tau' differ across ranks?)");
      o.region[pi[i] - o.rb] += pv[i];
    }
  }
  co_return Status();
}

// 4. global selection: at most k survivors over all regions; every rank agrees on n and k. This
// rank's survivors land at their place in the index-ordered concatenation (t.g_idx, t.g_val).
Task select_globally(OkTopk& o) {
  CompressedTensor& t = o.t;
  CompressScratch& s = o.s;
  const std::uint32_t P = o.P, me = o.me;
  const std::size_t n = o.n, k = o.k;
  const bool exact = t.calls % o.call.c.tau == 0;
  float th = t.global_threshold;
  if (exact)
    if (Status st = co_await exact_global_threshold(o.peers, o.tag, o.region, o.len, k, s, o.call, &th); !st.ok())
      co_return st;
  std::uint64_t total = 0;
  for (int attempt = 0;; ++attempt) {
    std::size_t c = 0;
    if (Status st = compress::count_above(o.region, o.len, th, &c); !st.ok()) co_return st;
    const std::uint64_t mine[3] = {n, k, c};
    if (Status st = co_await exchange_u64(o.peers, o.tag++, mine, 3, s, o.call); !st.ok()) co_return st;
    total = 0;
    for (std::uint32_t r = 0; r < P; ++r) {
      if (s.counts[3 * r] != n || s.counts[3 * r + 1] != k)
        co_return mismatch("rank " + std::to_string(r) + " has count " + std::to_string(s.counts[3 * r]) + " and k " +
                           std::to_string(s.counts[3 * r + 1]) + ", rank " + std::to_string(me) + " count " +
                           std::to_string(n) + " and k " + std::to_string(k));
      total += s.counts[3 * r + 2];
    }
    if (total <= k) break;
    // The gradient moved faster than the adaptation: raise now, and give up on estimating
    // after a few tries (every rank sees the same totals, so all take the same branch).
    if (attempt < kGlobalRetries) {
      th = std::min(th * kGlobalRaise, std::numeric_limits<float>::max());
    } else if (Status st = co_await exact_global_threshold(o.peers, o.tag, o.region, o.len, k, s, o.call, &th);
               !st.ok()) {
      co_return st;
    }
  }
  o.total = total;
  o.call.global_selected = total;
  // Adapt for the next call (the paper's band: lower when well below k).
  t.global_threshold = total < (3 * k) / 4 ? std::max(th / kGlobalLower, std::numeric_limits<float>::denorm_min()) : th;

  // Offsets of every region's survivors in the index-ordered concatenation.
  o.offset_of[0] = 0;
  for (std::uint32_t r = 0; r < P; ++r) o.offset_of[r + 1] = o.offset_of[r] + s.counts[3 * r + 2];
  const std::size_t mine_begin = o.offset_of[me], mine_count = o.offset_of[me + 1] - mine_begin;
  t.g_idx.resize(std::max<std::size_t>(total, 1));
  t.g_val.resize(std::max<std::size_t>(total, 1));
  std::size_t got = 0;
  if (Status st = compress::select_above(o.region, o.len, th, t.g_idx.data() + mine_begin, t.g_val.data() + mine_begin,
                                         mine_count, &got);
      !st.ok())
    co_return st;
  for (std::size_t i = 0; i < mine_count; ++i) t.g_idx[mine_begin + i] += o.rb;
  co_return Status();
}

// 5. balance: slot q = [chunk_begin(total, P, q), chunk_begin(total, P, q + 1)), then the
// balanced slots allgathered; the result is checked to be increasing indices below n.
Task balance_and_allgather(OkTopk& o) {
  CompressedTensor& t = o.t;
  const std::uint32_t P = o.P, me = o.me;
  const std::size_t total = o.total;
  const std::uint32_t tag_bal = o.tag, tag_ag = o.tag + 2;
  o.tag += 4;
  if (P > 1) {
    const std::size_t mine_begin = o.offset_of[me], mine_count = o.offset_of[me + 1] - mine_begin;
    const std::size_t my_s = chunk_begin(total, P, me), my_e = chunk_begin(total, P, me + 1);
    for (std::uint32_t q = 0; q < P; ++q) {
      if (q == me) continue;
      // What of my survivors falls into q's slot, and what of q's survivors falls into mine.
      const std::size_t qs = chunk_begin(total, P, q), qe = chunk_begin(total, P, q + 1);
      const std::size_t a = std::max(mine_begin, qs), b = std::min(mine_begin + mine_count, qe);
      if (a < b) {
        o.peers.send(q, tag_bal, t.g_idx.data() + a, (b - a) * 4);
        o.peers.send(q, tag_bal + 1, t.g_val.data() + a, (b - a) * 4);
        o.call.payload_words += 2 * (b - a);
      }
      const std::size_t c = std::max(o.offset_of[q], my_s), d = std::min(o.offset_of[q + 1], my_e);
      if (c < d) {
        o.peers.recv(q, tag_bal, t.g_idx.data() + c, (d - c) * 4);
        o.peers.recv(q, tag_bal + 1, t.g_val.data() + c, (d - c) * 4);
      }
    }
    if (Status st = co_await o.peers.wait(); !st.ok()) co_return st;
    // Allgather of the balanced slots.
    for (std::uint32_t q = 0; q < P; ++q) {
      if (q == me) continue;
      const std::size_t qs = chunk_begin(total, P, q), qe = chunk_begin(total, P, q + 1);
      if (my_e > my_s) {
        o.peers.send(q, tag_ag, t.g_idx.data() + my_s, (my_e - my_s) * 4);
        o.peers.send(q, tag_ag + 1, t.g_val.data() + my_s, (my_e - my_s) * 4);
        o.call.payload_words += 2 * (my_e - my_s);
      }
      if (qe > qs) {
        o.peers.recv(q, tag_ag, t.g_idx.data() + qs, (qe - qs) * 4);
        o.peers.recv(q, tag_ag + 1, t.g_val.data() + qs, (qe - qs) * 4);
      }
    }
    if (Status st = co_await o.peers.wait(); !st.ok()) co_return st;
  }
  for (std::size_t i = 0; i < total; ++i)
    if (t.g_idx[i] >= o.n || (i > 0 && t.g_idx[i] <= t.g_idx[i - 1]))
      co_return Status(ErrorCode::protocol_error, "oktopk: the gathered survivors are not increasing indices below " +
                                                      std::to_string(o.n) + " at position " + std::to_string(i));
  co_return Status();
}

// 6. residual: clear what this rank selected and what survived (a sorted intersection).
Status update_residual(OkTopk& o) {
  CompressedTensor& t = o.t;
  CompressScratch& s = o.s;
  s.kept.clear();
  s.kept.reserve(o.k);
  for (std::size_t i = 0, j = 0; i < o.sel && j < o.total;) {
    if (o.idx[i] < t.g_idx[j]) {
      ++i;
    } else if (t.g_idx[j] < o.idx[i]) {
      ++j;
    } else {
      s.kept.push_back(o.idx[i]);
      ++i;
      ++j;
    }
  }
  if (o.call.c.error_feedback) return t.residual.keep_unsent(t.id, s.kept.data(), s.kept.size());
  t.residual.clear(t.id);
  return Status();
}

}  // namespace

Task oktopk_allreduce(p2p::Peers& peers, CompressedCall& call, CompressScratch& s) {
  OkTopk o{peers, call, s, *call.tensor};
  o.P = peers.size();
  o.me = peers.rank();
  o.n = call.n;
  o.k = call.k;
  // Per-rank tables live on the stack (no allocation per call).
  if (o.P > 256) co_return Status(ErrorCode::unsupported, "oktopk: more than 256 ranks");
  if (Status st = co_await agree_call(peers, 1000, call, s); !st.ok()) co_return st;
  // 0. accumulate: acc = grad + residual, in the residual's buffer.
  float* acc = nullptr;
  if (Status st = o.t.residual.accumulate(o.t.id, call.grad, o.n, &acc); !st.ok()) co_return st;
  if (Status st = select_locally(o, acc); !st.ok()) co_return st;
  if (Status st = co_await agree_boundaries(o); !st.ok()) co_return st;
  if (Status st = co_await reduce_regions(o); !st.ok()) co_return st;
  if (Status st = co_await select_globally(o); !st.ok()) co_return st;
  if (Status st = co_await balance_and_allgather(o); !st.ok()) co_return st;
  if (Status st = update_residual(o); !st.ok()) co_return st;
  // 7. result (grad is no longer read: out may alias it).
  std::fill(call.out, call.out + o.n, 0.0f);
  const bool avg = call.c.op == ReduceOp::avg;
  for (std::size_t i = 0; i < o.total; ++i)
    call.out[o.t.g_idx[i]] = avg ? o.t.g_val[i] / static_cast<float>(o.P) : o.t.g_val[i];
  ++o.t.calls;
  co_return Status();
}

}  // namespace sparcoll::algo
