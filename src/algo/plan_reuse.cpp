#include "algo/plan_reuse.hpp"

#include <algorithm>

namespace sparcoll::algo {

PlanReuse::Entry* PlanReuse::find(const PlanKey& key) {
  for (Entry& e : entries_)
    if (e.key == key) return &e;
  return nullptr;
}

const std::uint32_t* PlanReuse::reusable(const PlanKey& key, std::size_t table_size) {
  ++calls_;
  Entry* e = find(key);
  if (e == nullptr) return nullptr;
  e->last_use = calls_;
  if (!e->trusted || e->reuses >= max_reuses_ || e->table.size() != table_size) return nullptr;
  return e->table.data();
}

void PlanReuse::record(const PlanKey& key, bool exchanged, const std::uint32_t* table, std::size_t table_size,
                       const std::vector<std::uint64_t>& decisions) {
  if (max_reuses_ == 0) return;
  Entry* e = find(key);
  if (e == nullptr) {
    if (!exchanged) return;  // never: a reused table has an entry
    if (entries_.size() < kShapes) {
      entries_.emplace_back();
      e = &entries_.back();
    } else {
      e = &*std::min_element(entries_.begin(), entries_.end(),
                             [](const Entry& a, const Entry& b) { return a.last_use < b.last_use; });
    }
    e->key = key;
    e->trusted = false;  // one result says nothing about the next
    e->last_use = calls_;
  } else {
    e->trusted = e->last_decisions == decisions;
  }
  if (exchanged) {
    e->table.assign(table, table + table_size);
    e->reuses = 0;
  } else {
    ++e->reuses;
  }
  e->last_decisions = decisions;
}

void PlanReuse::forget_all() noexcept {
  entries_.clear();
  calls_ = 0;
}

}  // namespace sparcoll::algo
