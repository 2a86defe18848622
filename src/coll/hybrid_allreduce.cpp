// The hybrid allreduce on the collective thread: every stripe of the tensor goes the way that
// costs least for its density:
//   1. each rank samples its stripes' non-zero blocks (algo::sample_stripe_masks), every rank's
//      samples are exchanged (one small message to every peer) and every rank computes the same
//      plan from the same table (algo/hybrid_plan.hpp); or, while this shape's results are
//      steady, it plans from the table it keeps, with no sample and no message
//      (algo/plan_reuse.hpp);
//   2. the whole tensor goes by block recursive doubling where the table favours it; else a
//      tensor below SPARCOLL_HYBRID_MIN_BYTES goes whole by the dense algorithm below stripes,
//      and a larger one in stripes:
//   3. the sparse stripes, and only they, are scanned into the bitmap of the op slot the calling
//      thread reserved, and go to the block-sparse engine, which runs them on the progress
//      threads while
//   4. this thread runs each run of adjacent dense stripes through the dense ring;
//   5. the op completes once the block-sparse half has.
// Each element is reduced by exactly one of the two paths, each bitwise identical on every rank,
// so the result is too. docs/architecture.md, "Hybrid allreduce".
#include <bit>

#include "algo/hybrid_plan.hpp"
#include "block/bitmap.hpp"
#include "coll/executor.hpp"
#include "block_sparse/engine.hpp"
#include "block_sparse/op_scan.hpp"

namespace sparcoll::coll {
namespace {

constexpr std::uint32_t kMasksTag = 0;
// Each dense run numbers its algorithm's tags from here up (Peers::set_tag_base): the ring's
// segments number theirs below kRingTags.
constexpr std::uint32_t kRunTagStride = algo::kRingTags;

bool is_dense(const std::vector<std::uint64_t>& mask, std::uint32_t s) { return (mask[s / 64] >> (s % 64)) & 1; }

algo::PlanKey plan_key(const CollOp& op) { return algo::PlanKey{op.count, op.dtype, op.op}; }

}  // namespace

void Executor::release_unused_sparse_part(CollOp& op) {
  block_sparse::OpState* part = op.hybrid.sparse_part;
  if (part == nullptr || op.hybrid.handed_over) return;
  op.hybrid.sparse_part = nullptr;
  detail::release_slot(part->busy);
}

// The ring, on every transport. On shm, `direct` (one-copy reads of the peers' memory) was the
// dense half until it was measured on another host, where process_vm_readv copies at half
// memcpy's speed (7 against 14 GB/s): the ring there was 2-3x faster from 1 to 100 MiB at 2 and 4
// ranks, and it was already faster at 100 MiB on the host direct was chosen on (22 against 27
// ms). A choice measured at setup would change the summation order, and so the result's bits,
// from one run to the next.
Task Executor::dense_part(const CollOp& op, std::size_t begin, std::size_t end) {
  const std::size_t esize = dtype_size(op.dtype);
  const auto* send = static_cast<const std::byte*>(op.send) + begin * esize;
  auto* recv = static_cast<std::byte*>(op.recv) + begin * esize;
  const Algorithm algo = Algorithm::ring;
  if (op.dtype == DataType::i32 && op.op == ReduceOp::avg)
    co_return co_await exact_i32_avg(algo, send, recv, end - begin);
  co_return co_await allreduce(algo, send, recv, end - begin, op.dtype, op.op);
}

Task Executor::hybrid_allreduce(CollOp& op, algo::KeptPlan kept) {
  // 1. Every rank's samples and the plan from them, or what this shape keeps (algo/plan_reuse.hpp).
  const bool exchanged = !kept.kept();
  hybrid_stats_.densities_exchanged = exchanged;
  if (exchanged) {
    if (Status s = co_await exchange_stripe_masks(op); !s.ok()) co_return s;
  } else {
    stripe_table_.assign(kept.table, kept.table + std::size_t{peers_.size()} * op.hybrid.stripe_masks.size());
  }
  Status status;
  engine_counted_ = false;
  union_counted_ = false;
  in_stripes_ = false;
  const auto stripes = static_cast<std::uint32_t>(op.hybrid.stripe_masks.size());
  const std::uint64_t nblocks = op.hybrid.sparse_part->geometry.nblocks();
  const bool block_rd = algo::prefer_block_recursive_doubling(stripe_table_.data(), peers_.size(), stripes, nblocks,
                                                              op.hybrid.stripe_blocks, op.hybrid.rd_max_percent,
                                                              op.hybrid.stripes_unless_rd);
  if (block_rd || !op.hybrid.stripes_unless_rd) {
    status = co_await hybrid_whole_tensor(op, block_rd);
  } else if (kept.dense != nullptr) {
    // In stripes again: the plan the last result called for.
    in_stripes_ = true;
    status = co_await hybrid_striped(op, kept.dense, nullptr);
  } else {
    // The stripes planned from the masks' estimated counts; the masks stay what the shape keeps
    // (remember_result).
    in_stripes_ = true;
    mask_counts_.resize(stripe_table_.size());
    algo::mask_counts(stripe_table_.data(), stripe_table_.size(), stripes, nblocks, op.hybrid.stripe_blocks,
                      mask_counts_.data());
    status = co_await hybrid_striped(op, nullptr, mask_counts_.data());
  }
  if (status.ok()) remember_result(op, exchanged);
  co_return status;  // a failure makes every shape exchange again (run_one)
}

// Steps 2-4: the plan from every rank's counts (`counts`, ranks x stripes), or the one kept; the
// sparse stripes to the engine, the dense ones on this thread meanwhile, then the sparse half's end.
Task Executor::hybrid_striped(CollOp& op, const std::vector<std::uint64_t>* kept_dense, const std::uint32_t* counts) {
  block_sparse::OpState& part = *op.hybrid.sparse_part;
  const auto stripes = static_cast<std::uint32_t>(op.hybrid.stripe_masks.size());
  if (kept_dense != nullptr)
    dense_plan_ = *kept_dense;
  else
    algo::plan_dense_stripes(counts, peers_.size(), stripes, part.geometry.nblocks(), op.hybrid.stripe_blocks,
                             static_cast<std::uint32_t>(options_.hybrid_dense_percent), &dense_plan_);
  // The engine reads the op slot's copy; this thread keeps its own, since the slot may be
  // reused once the engine is done with it, while this thread still runs dense stripes.
  part.dense_stripes = dense_plan_;
  const std::shared_ptr<detail::RequestState> sparse_done = hand_over_sparse_stripes(op);
  Status status = co_await run_dense_stripes(op);
  if (sparse_done) status = co_await wait_for_sparse_stripes(*sparse_done, status);
  co_return status;
}

// What this call may plan from instead of exchanging (algo/plan_reuse.hpp). Every rank gets the
// same answer; called once per hybrid allreduce on every rank, whatever its arguments (the calls
// are part of what every rank must agree on).
algo::KeptPlan Executor::kept_plan(const CollOp& op) {
  return plan_reuse_.reusable(plan_key(op), std::size_t{peers_.size()} * op.hybrid.stripe_masks.size());
}

// After a call that succeeded: what its result (the same bits on every rank) says the next call
// of this shape should do. The block-sparse stripes' counts are exact and free: the engine
// counted the result blocks it received (OpState::stripe_results); so are a tensor's sent whole
// by block recursive doubling, in its union (count_union_blocks). The others are sampled from
// the result, 32 blocks per stripe (a dense stripe's sampled blocks are mostly non-zero, and the
// read of a non-zero block stops at its first non-zero element): a tensor sent in stripes at a
// phase that moves from call to call (the calls so far, the same count on every rank), so that a
// stripe sent dense by a sample's mistake is seen again through other blocks; a tensor sent whole
// at the middle of each part, as its decision is compared from one result to the next. Only the
// call that exchanged the samples counts a striped tensor's dense stripes exactly; after it, a
// dense stripe whose sample would send it block-sparse is counted exactly first
// (algo::sample_leaves_dense). A tensor that went in stripes keeps both: its masks and band, and
// the plan its result calls for, which its next call in stripes follows (planned from the masks'
// samples on every call, 4 MiB at 10% and 4 ranks over shm sent 3.2 MB instead of 1.4, in 1.25x
// the time).
void Executor::remember_result(const CollOp& op, bool exchanged) {
  if (!plan_reuse_.enabled()) return;
  const auto stripes = static_cast<std::uint32_t>(op.hybrid.stripe_masks.size());
  const std::uint64_t nblocks = block::block_count(op.count, options_.block_elems);
  const std::uint64_t phase =
      in_stripes_ ? plan_reuse_.calls() * 0x9E3779B97F4A7C15ull >> 32 : algo::kMiddlePhase;  // spread over the stripe
  // The call that planned from exchanged samples counts its dense stripes' results exactly, so
  // that the samples' mistakes last one call (algo::follow_result's dense_exact). Once per
  // exchange: a dense stripe's exact count reads its zero blocks in full.
  const bool dense_exact = in_stripes_ && exchanged;
  const auto dense_percent = static_cast<std::uint32_t>(options_.hybrid_dense_percent);
  result_counts_.resize(stripes);
  for (std::uint32_t s = 0; s < stripes; ++s) {
    const std::uint64_t first = std::uint64_t{s} * op.hybrid.stripe_blocks;
    const std::uint64_t blocks = std::min<std::uint64_t>(op.hybrid.stripe_blocks, nblocks - first);
    if (!union_counted_ && (!engine_counted_ || is_dense(dense_plan_, s))) {
      result_counts_[s] =
          dense_exact ? algo::count_stripe_blocks(op.recv, op.count, op.dtype, options_.block_elems, first, blocks)
                      : algo::sample_stripe_count(op.recv, op.count, op.dtype, options_.block_elems, first, blocks, phase);
      // A dense stripe leaves for the engine on an exact count, not on a sample's noise.
      if (in_stripes_ && !dense_exact && is_dense(dense_plan_, s) &&
          algo::sample_leaves_dense(result_counts_[s], blocks, dense_percent))
        result_counts_[s] = algo::count_stripe_blocks(op.recv, op.count, op.dtype, options_.block_elems, first, blocks);
    }
  }
  const algo::PlanKey key = plan_key(op);
  if (in_stripes_)
    algo::follow_result(result_counts_.data(), dense_plan_, stripes, nblocks, op.hybrid.stripe_blocks, dense_percent,
                        &next_plan_, dense_exact);
  // The whole-tensor threshold depends only on the ranks, rd_max_percent and stripes_unless_rd
  // (the transport and the tensor's size): computed again only when those change.
  if (op.hybrid.rd_max_percent != whole_high_for_ || op.hybrid.stripes_unless_rd != whole_high_against_stripes_) {
    whole_high_ = algo::whole_tensor_dense_union_percent(peers_.size(), op.hybrid.rd_max_percent,
                                                         op.hybrid.stripes_unless_rd);
    whole_high_for_ = op.hybrid.rd_max_percent;
    whole_high_against_stripes_ = op.hybrid.stripes_unless_rd;
  }
  plan_reuse_.record(key, exchanged, stripe_table_.data(), std::size_t{peers_.size()} * stripes,
                     algo::result_rd_band(result_counts_.data(), stripes, nblocks, whole_high_),
                     algo::result_union_percent(result_counts_.data(), stripes, nblocks),
                     in_stripes_ ? &next_plan_ : nullptr);
}

// A tensor sent whole by block recursive doubling: its result's blocks per stripe, counted in the
// union that the algorithm's last step held (the same bits on every rank), instead of a sample
// of the result: exact, and no read of the result (the sample was 3-6% of the hybrid's time at
// 128 KiB-2 MiB and 1%, 2 ranks; docs/perf-log.md, "Whole tensors up to 16 MiB over a wire").
void Executor::count_union_blocks(const CollOp& op) {
  const std::vector<std::uint64_t>& bits = scratch_.sparse.union_bits;
  const auto stripes = static_cast<std::uint32_t>(op.hybrid.stripe_masks.size());
  const std::uint32_t words_per_stripe = op.hybrid.stripe_blocks / 64;
  if (op.hybrid.stripe_blocks % 64 != 0 || words_per_stripe == 0 ||
      bits.size() != block::bitmap_words(block::block_count(op.count, options_.block_elems)))
    return;  // sampled in remember_result instead
  result_counts_.assign(stripes, 0);
  for (std::size_t w = 0; w < bits.size(); ++w)
    result_counts_[w / words_per_stripe] += static_cast<std::uint32_t>(std::popcount(bits[w]));
  union_counted_ = true;
}

// This rank's sample mask of every stripe, sent to every peer, and theirs received: the table
// every rank plans from. Sampled here rather than by the calling thread: a call that plans
// from a kept table needs no sample (1 MiB of a 16 MiB tensor, read block by block, took 55-85 us).
Task Executor::exchange_stripe_masks(CollOp& op) {
  HybridArgs& h = op.hybrid;
  const std::uint32_t n = peers_.size(), r = peers_.rank();
  const auto stripes = static_cast<std::uint32_t>(h.stripe_masks.size());
  // The samples' masks, not their counts (the same 4 bytes a stripe): block recursive doubling's
  // cost is the size of unions of ranks, which the OR of their masks samples
  // (algo::prefer_block_recursive_doubling); the stripes' plan takes the counts the masks give
  // (algo::mask_counts).
  if (stripes > 0)
    algo::sample_stripe_masks(op.send, op.count, op.dtype, options_.block_elems, h.stripe_blocks,
                              h.stripe_masks.data());
  stripe_table_.assign(std::size_t{n} * stripes, 0);
  std::copy(h.stripe_masks.begin(), h.stripe_masks.end(), stripe_table_.begin() + std::size_t{r} * stripes);
  for (std::uint32_t p = 0; p < n; ++p) {
    if (p == r) continue;
    peers_.send(p, kMasksTag, h.stripe_masks.data(), stripes * 4);
    peers_.recv(p, kMasksTag, stripe_table_.data() + std::size_t{p} * stripes, stripes * 4);
  }
  co_return co_await peers_.wait();
}

// The whole tensor by block recursive doubling (`block_rd`: what the exchanged masks favour) or
// the dense algorithm below stripes.
Task Executor::hybrid_whole_tensor(CollOp& op, bool block_rd) {
  release_unused_sparse_part(op);
  const Algorithm algo =
      block_rd ? Algorithm::block_recursive_doubling : algo::dense_algorithm_below_stripes(peers_.size());
  peers_.set_tag_base(kRunTagStride);
  // i32 avg reduces two halves of every element (exact_i32_avg): a tensor of twice the count.
  const bool exact_avg = op.dtype == DataType::i32 && op.op == ReduceOp::avg;
  // No co_await inside a conditional expression: GCC 12 destroys the temporaries of both arms.
  Status s;
  if (exact_avg)
    s = co_await exact_i32_avg(algo, op.send, op.recv, op.count);
  else
    s = co_await allreduce(algo, op.send, op.recv, op.count, op.dtype, op.op);
  peers_.set_tag_base(0);
  // Every return of block recursive doubling that succeeded left this tensor's union.
  if (s.ok() && block_rd && !exact_avg) count_union_blocks(op);
  hybrid_stats_.dense_elements += algo == Algorithm::block_recursive_doubling ? 0 : op.count;
  co_return s;
}

// The sparse stripes scanned (each run of them in one call: the scan splits it over TBB's
// threads) and handed to the engine; the dense stripes' bits stay clear. Returns what the
// engine completes, or null when every stripe is dense.
std::shared_ptr<detail::RequestState> Executor::hand_over_sparse_stripes(CollOp& op) {
  HybridArgs& h = op.hybrid;
  block_sparse::OpState& part = *h.sparse_part;
  const auto stripes = static_cast<std::uint32_t>(h.stripe_masks.size());
  const std::uint64_t nblocks = part.geometry.nblocks();
  std::uint32_t dense_count = 0;
  for (std::uint64_t word : part.dense_stripes) dense_count += static_cast<std::uint32_t>(std::popcount(word));
  if (dense_count == stripes) return nullptr;
  part.stripe_blocks = dense_count > 0 ? h.stripe_blocks : 0;
  for (std::uint32_t s = 0; s < stripes;) {
    if (is_dense(part.dense_stripes, s)) {
      ++s;
      continue;
    }
    std::uint32_t e = s;
    while (e < stripes && !is_dense(part.dense_stripes, e)) ++e;
    block_sparse::scan_op_blocks(part, op.count, std::size_t{s} * h.stripe_blocks,
                                 std::min<std::uint64_t>(std::uint64_t{e} * h.stripe_blocks, nblocks), &signed_zero_);
    s = e;
  }
  if (plan_reuse_.enabled()) {  // the result's exact counts of the block-sparse stripes
    result_counts_.resize(stripes);
    part.counted_stripe_blocks = h.stripe_blocks;
    part.counted_stripes = stripes;
    part.stripe_results.assign(std::size_t{engine_->thread_count()} * stripes, 0);
    part.stripe_results_out = result_counts_.data();
    engine_counted_ = true;
  }
  auto sparse_done = std::make_shared<detail::RequestState>();
  part.request = sparse_done;
  part.wake_raw = true;
  h.handed_over = true;
  engine_->hand_over(&part);
  return sparse_done;
}

// Each run of adjacent dense stripes through the dense path.
Task Executor::run_dense_stripes(const CollOp& op) {
  const auto stripes = static_cast<std::uint32_t>(op.hybrid.stripe_masks.size());
  const std::size_t elems_per_stripe = std::size_t{op.hybrid.stripe_blocks} * options_.block_elems;
  Status status;
  std::uint32_t run = 0;
  for (std::uint32_t s = 0; s < stripes && status.ok();) {
    if (!is_dense(dense_plan_, s)) {
      ++s;
      continue;
    }
    std::uint32_t e = s;
    while (e < stripes && is_dense(dense_plan_, e)) ++e;
    const std::size_t begin = s * elems_per_stripe, end = std::min<std::size_t>(e * elems_per_stripe, op.count);
    peers_.set_tag_base(kRunTagStride * ++run);
    status = co_await dense_part(op, begin, end);
    hybrid_stats_.dense_elements += end - begin;
    s = e;
  }
  peers_.set_tag_base(0);
  co_return status;
}

// The block-sparse half touches the caller's buffers until it completes: await it. Meanwhile
// the loop keeps serving the channel (a packet transport's peers need our acknowledgements) and
// sleeps between polls rather than yield (runtime::Waiting::other_thread): on oversubscribed
// cores a yielding thread still takes the progress threads' time; the engine's completion wakes it.
Task Executor::wait_for_sparse_stripes(detail::RequestState& sparse_done, Status status) {
  co_await peers_.wait_for(sparse_done.done);
  if (status.ok()) status = sparse_done.status;
  hybrid_stats_.bytes_sent += sparse_done.stats.bytes_sent;
  hybrid_stats_.bytes_received += sparse_done.stats.bytes_received;
  hybrid_stats_.blocks_sent += sparse_done.stats.blocks_sent;
  hybrid_stats_.blocks_received += sparse_done.stats.blocks_received;
  co_return status;
}

}  // namespace sparcoll::coll
