// The hybrid allreduce's density table, kept for later calls of the same shape. A training step
// allreduces the same tensors (or DDP's buckets) in the same order every step, with densities
// that change slowly; exchanging every rank's stripe estimates on every call costs a blocking
// round trip (10 us at 2 ranks over tcp, 7-60 us at 4 ranks on 2 cores) that a steady step does
// not need. So a call may plan from the table the last exchange for its shape brought, while the
// shape's results say the data has not moved.
//
// Every rank must reach the same answer, or some ranks exchange while the others do not and the
// collective waits for its deadline. So the answer depends only on what is the same bits on
// every rank: the call's shape (count, dtype, op: the same in every rank's call sequence, unlike
// buffer addresses), the table (the same on every rank after an exchange), the calls so far, and
// each result (bitwise identical on every rank), compared in integers.
//
// The rule: a shape reuses its table when its last two results called for the same plan (each
// result's sampled union density, compared with the thresholds the plan uses, gives one bit per
// stripe: dense or not; one bit for a tensor sent whole: the dense algorithm or block recursive
// doubling; result_decisions in hybrid_plan.hpp), for at most max_reuses calls after the
// exchange. The comparison is of decisions, not densities: a 32-block sample of a real
// gradient's stripe moves by 10-20 points from one step to the next, and only a move across a
// threshold changes what the plan should be. Data that alternates between two tensors of one
// shape on either side of a threshold never qualifies. A change of the data across a threshold
// is seen in the first result after it, and the next call exchanges: at most one call runs on a
// stale plan, which costs speed, never correctness (any plan reduces every element exactly once).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "sparcoll/types.hpp"

namespace sparcoll::algo {

struct PlanKey {
  std::size_t count = 0;
  DataType dtype = DataType::f32;
  ReduceOp op = ReduceOp::sum;
  bool operator==(const PlanKey&) const = default;
};

class PlanReuse {
 public:
  // max_reuses: calls a table may serve after its exchange (SPARCOLL_HYBRID_PLAN_REUSE); 0 turns
  // reuse off.
  explicit PlanReuse(std::uint32_t max_reuses) : max_reuses_(max_reuses) { entries_.reserve(kShapes); }
  bool enabled() const noexcept { return max_reuses_ > 0; }

  // The table (table_size counts: ranks x stripes) this call may plan from without an exchange,
  // or null: exchange.
  const std::uint32_t* reusable(const PlanKey& key, std::size_t table_size);

  // After a call that succeeded. `exchanged`: its table came from an exchange (then `table` is
  // that table). `decisions`: what its result says the plan should be (result_decisions).
  void record(const PlanKey& key, bool exchanged, const std::uint32_t* table, std::size_t table_size,
              const std::vector<std::uint64_t>& decisions);

  // After a failed call: everything is forgotten, and every shape exchanges again. A collective
  // fails on every rank alike (the failing rank tells the others), so every rank forgets at the
  // same call, and the state that a rank with bad arguments built differently (its count was
  // not the others') is gone with it.
  void forget_all() noexcept;

  // The shapes kept: the least recently used one makes room for a new one.
  static constexpr std::size_t kShapes = 16;

 private:
  struct Entry {
    PlanKey key;
    bool trusted = false;
    std::uint32_t reuses = 0;  // calls planned from `table` since its exchange
    std::uint64_t last_use = 0;
    std::vector<std::uint32_t> table;
    std::vector<std::uint64_t> last_decisions;  // what the last result said the plan should be
  };
  Entry* find(const PlanKey& key);
  std::uint32_t max_reuses_;
  std::uint64_t calls_ = 0;
  std::vector<Entry> entries_;
};

}  // namespace sparcoll::algo
