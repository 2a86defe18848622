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

KeptPlan PlanReuse::reusable(const PlanKey& key, std::size_t table_size, bool whole_tensor) {
  ++calls_;
  Entry* e = find(key);
  if (e == nullptr) return {};
  e->last_use = calls_;
  if (!e->trusted) return {};
  if (!whole_tensor) return e->next.empty() ? KeptPlan{} : KeptPlan{nullptr, &e->next};
  if (e->reuses >= max_reuses_ || e->table.size() != table_size) return {};
  return KeptPlan{e->table.data(), e->next.empty() ? nullptr : &e->next};
}

void PlanReuse::record_whole(const PlanKey& key, bool exchanged, const std::uint32_t* table, std::size_t table_size,
                             RdBand band, const std::vector<std::uint64_t>* next) {
  if (max_reuses_ == 0) return;
  Entry* e = find(key);
  if (e == nullptr) {
    if (!exchanged) return;  // never: a reused table has an entry
    e = &add(key);
  } else {
    e->trusted = e->last_band == band;
  }
  if (exchanged) {
    e->table.assign(table, table + table_size);
    e->reuses = 0;
  } else {
    ++e->reuses;
  }
  e->last_band = band;
  if (next != nullptr)
    e->next = *next;
  else
    e->next.clear();
}

void PlanReuse::record_stripes(const PlanKey& key, const std::vector<std::uint64_t>& next, std::uint64_t union_blocks,
                               std::uint64_t nblocks) {
  if (max_reuses_ == 0) return;
  const auto percent = static_cast<std::uint32_t>(nblocks == 0 ? 0 : std::min(union_blocks, nblocks) * 100 / nblocks);
  Entry* e = find(key);
  if (e == nullptr) {
    e = &add(key);
  } else {
    const std::uint32_t moved = percent > e->last_union_percent ? percent - e->last_union_percent
                                                                : e->last_union_percent - percent;
    e->trusted = moved <= kSteadyUnionPercent;
  }
  e->next = next;
  e->last_union_percent = percent;
}

void PlanReuse::forget_all() noexcept {
  entries_.clear();
  calls_ = 0;
}

}  // namespace sparcoll::algo
