#include "algo/plan_reuse.hpp"

#include <algorithm>

namespace sparcoll::algo {

PlanReuse::Entry* PlanReuse::find(const PlanKey& key) {
  for (Entry& e : entries_)
    if (e.key == key) return &e;
  return nullptr;
}

PlanReuse::Entry& PlanReuse::add(const PlanKey& key) {
  Entry* e = nullptr;
  if (entries_.size() < kShapes) {
    e = &entries_.emplace_back();
  } else {
    e = &*std::min_element(entries_.begin(), entries_.end(),
                           [](const Entry& a, const Entry& b) { return a.last_use < b.last_use; });
  }
  e->key = key;
  e->trusted = false;  // one result says nothing about the next
  e->last_use = calls_;
  e->reuses = 0;
  e->table.clear();
  e->last_band = RdBand::inside;
  e->next.clear();
  e->last_union_percent = 0;
  return *e;
}

KeptPlan PlanReuse::reusable(const PlanKey& key, std::size_t table_size) {
  ++calls_;
  Entry* e = find(key);
  if (e == nullptr) return {};
  e->last_use = calls_;
  if (!e->trusted) return {};
  const std::vector<std::uint64_t>* next = e->next.empty() ? nullptr : &e->next;
  if (e->reuses >= max_reuses_ || e->table.size() != table_size) return KeptPlan{nullptr, next};
  return KeptPlan{e->table.data(), next};
}

void PlanReuse::record(const PlanKey& key, bool exchanged, const std::uint32_t* table, std::size_t table_size,
                       RdBand band, std::uint32_t union_percent, const std::vector<std::uint64_t>* next) {
  if (max_reuses_ == 0) return;
  Entry* e = find(key);
  if (e == nullptr) {
    if (!exchanged) return;  // never: a reused table has an entry
    e = &add(key);
  } else {
    const std::uint32_t moved = union_percent > e->last_union_percent ? union_percent - e->last_union_percent
                                                                      : e->last_union_percent - union_percent;
    // A tensor sent whole is steady while its decision is: its union may move (a real gradient's
    // moved by 10-20 points from step to step) without changing what its masks favour.
    e->trusted = e->last_band == band && (next == nullptr || moved <= kSteadyUnionPercent);
  }
  if (exchanged) {
    e->table.assign(table, table + table_size);
    e->reuses = 0;
  } else {
    ++e->reuses;
  }
  e->last_band = band;
  e->last_union_percent = union_percent;
  if (next != nullptr)
    e->next = *next;
  else
    e->next.clear();
}

void PlanReuse::forget_all() noexcept {
  entries_.clear();
  calls_ = 0;
}

}  // namespace sparcoll::algo
