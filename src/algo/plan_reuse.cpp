#include "algo/plan_reuse.hpp"

#include <algorithm>

namespace sparcoll::algo {
namespace {

bool close(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t s = 0; s < a.size(); ++s) {
    const int d = static_cast<int>(a[s]) - static_cast<int>(b[s]);
    if (d > static_cast<int>(kDriftPercent) || -d > static_cast<int>(kDriftPercent)) return false;
  }
  return true;
}

}  // namespace

PlanReuse::Entry* PlanReuse::find(const PlanKey& key) {
  for (Entry& e : entries_)
    if (e.valid && e.key == key) return &e;
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
                       const std::vector<std::uint8_t>& union_percent) {
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
    e->valid = true;
    e->key = key;
    e->trusted = false;  // one result says nothing about the next
    e->last_use = calls_;
  } else {
    e->trusted = close(e->last_result, union_percent);
  }
  if (exchanged) {
    e->table.assign(table, table + table_size);
    e->reuses = 0;
  } else {
    ++e->reuses;
  }
  e->last_result = union_percent;
}

void PlanReuse::forget_all() noexcept {
  entries_.clear();
  calls_ = 0;
}

void union_percents(const std::uint32_t* counts, std::uint32_t stripes, std::uint64_t nblocks,
                    std::uint32_t stripe_blocks, std::vector<std::uint8_t>* percent) {
  percent->resize(stripes);
  for (std::uint32_t s = 0; s < stripes; ++s) {
    const std::uint64_t first = std::uint64_t{s} * stripe_blocks;
    const std::uint64_t blocks = first < nblocks ? std::min<std::uint64_t>(stripe_blocks, nblocks - first) : 0;
    (*percent)[s] = blocks == 0 ? 0 : static_cast<std::uint8_t>(std::min<std::uint64_t>(100, counts[s] * 100 / blocks));
  }
}

}  // namespace sparcoll::algo
