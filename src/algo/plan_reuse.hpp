// What a later call of a hybrid allreduce's shape plans from, instead of exchanging every rank's
// sampled densities. A training step allreduces the same tensors (or DDP's buckets) in the same
// order every step, with densities that change slowly; exchanging on every call costs a blocking
// round trip (10 us at 2 ranks over tcp, 7-60 us at 4 ranks on 2 cores) that a steady step does
// not need, and plans from 32-block samples, whose noise sends stripes the wrong way.
//
// Every rank must reach the same answer, or some ranks exchange while the others do not and the
// collective waits for its deadline. So the answer depends only on what is the same bits on
// every rank: the call's shape (count, dtype, op: the same in every rank's call sequence, unlike
// buffer addresses), the exchanged tables, the calls so far, and each result (bitwise identical
// on every rank), compared in integers.
//
// What a shape keeps: the sample masks of its last exchange (block recursive doubling's cost is
// the unions of groups of ranks, which only the ranks' own masks tell), for at most max_reuses
// calls after the exchange, while the shape is steady: its last two results called for the same
// way (result_rd_band in hybrid_plan.hpp), and if it went in stripes their union densities (all
// stripes together) are within kSteadyUnionPercent of each other. Where its masks send it in
// stripes it also keeps the plan its last result calls for (follow_result in hybrid_plan.hpp),
// which its next call in stripes follows, also the call that exchanges the masks again after
// max_reuses: the block-sparse stripes' union counts are exact, so a plan that follows them
// settles on the stripes' true union densities, where a plan from the exchanged samples keeps
// their noise. Two tensors of one shape in turn (a sparse and a dense one) are not steady and
// exchange on every call; two alike share one plan, which suits both.
// The first result of a shape says nothing about the next: its second call exchanges too. A
// change of the data is seen in the first result after it: at most one call runs on a stale
// plan, which costs speed, never correctness (any plan reduces every element exactly once).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "algo/hybrid_plan.hpp"
#include "sparcoll/types.hpp"

namespace sparcoll::algo {

struct PlanKey {
  std::size_t count = 0;
  DataType dtype = DataType::f32;
  ReduceOp op = ReduceOp::sum;
  bool operator==(const PlanKey&) const = default;
};

// What a call may plan from; table null: it exchanges the masks (and, with `dense`, still follows
// its last result if it goes in stripes).
struct KeptPlan {
  const std::uint32_t* table = nullptr;               // every rank's sample masks
  const std::vector<std::uint64_t>* dense = nullptr;  // if it went in stripes: the dense stripes' bits
  bool kept() const noexcept { return table != nullptr; }
};

class PlanReuse {
 public:
  // Two results in stripes whose union densities differ by more than this (points of the tensor)
  // say that the shape holds different data from call to call.
  static constexpr std::uint32_t kSteadyUnionPercent = 10;
  // The shapes kept: the least recently used one makes room for a new one.
  static constexpr std::size_t kShapes = 16;

  // max_reuses (SPARCOLL_HYBRID_PLAN_REUSE): calls a kept table may serve after its exchange; 0
  // turns reuse off for every shape (every call exchanges).
  explicit PlanReuse(std::uint32_t max_reuses) : max_reuses_(max_reuses) { entries_.reserve(kShapes); }
  bool enabled() const noexcept { return max_reuses_ > 0; }

  // What this call may plan from. table_size: the ranks x stripes of the call's table.
  KeptPlan reusable(const PlanKey& key, std::size_t table_size);
  // Hybrid calls so far (the same count on every rank): where a call's result sample starts.
  std::uint64_t calls() const noexcept { return calls_; }

  // After a call that succeeded. `exchanged`: its table came from an exchange (then `table` is
  // that table). `band`: what its result calls for (result_rd_band); `union_percent`: its
  // result's union density (whole percent of the tensor's blocks). `next`: the plan its result
  // calls for if it went in stripes (follow_result), else null.
  void record(const PlanKey& key, bool exchanged, const std::uint32_t* table, std::size_t table_size, RdBand band,
              std::uint32_t union_percent, const std::vector<std::uint64_t>* next = nullptr);

  // After a failed call: everything is forgotten, and every shape exchanges again. A collective
  // fails on every rank alike (the failing rank tells the others), so every rank forgets at the
  // same call, and the state that a rank with bad arguments built differently (its count was
  // not the others') is gone with it.
  void forget_all() noexcept;

 private:
  struct Entry {
    PlanKey key;
    bool trusted = false;  // the next call may plan from what is kept
    std::uint64_t last_use = 0;
    std::uint32_t reuses = 0;  // calls planned from `table` since its exchange
    std::vector<std::uint32_t> table;
    // What its last result called for, and that result's union density (percent).
    RdBand last_band = RdBand::inside;
    std::uint32_t last_union_percent = 0;
    std::vector<std::uint64_t> next;  // the plan for its next call, if it went in stripes
  };
  Entry* find(const PlanKey& key);
  // The entry of a shape that has none yet (the least recently used one when all are taken).
  Entry& add(const PlanKey& key);
  std::uint32_t max_reuses_;
  std::uint64_t calls_ = 0;
  std::vector<Entry> entries_;
};

}  // namespace sparcoll::algo
