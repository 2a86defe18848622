// A channel's own counters (ChannelCounters) as the thread that drives the channel last read
// them, for any thread to read: a progress thread publishes its channel's every few
// milliseconds, the collective thread after each collective. Lock-free: the names are fixed by
// the first publish (a driver reports the same set every time) and published before the count.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <vector>

#include "transport/driver.hpp"

namespace sparcoll::transport {

class PublishedCounters {
 public:
  // By the one thread that drives the channel.
  void publish(const ChannelCounters& c) noexcept {
    const std::uint32_t known = count_.load(std::memory_order_relaxed);
    for (std::uint32_t i = 0; i < c.count; ++i) {
      if (i >= known) names_[i].store(c.items[i].name, std::memory_order_relaxed);
      values_[i].store(c.items[i].value, std::memory_order_relaxed);
    }
    if (c.count > known) count_.store(c.count, std::memory_order_release);
  }
  // Adds each counter to the entry of `totals` with its name, appending the entry when there is
  // none (any thread; not on a hot path: it may allocate).
  void add_to(std::vector<NamedCounter>* totals) const {
    const std::uint32_t n = count_.load(std::memory_order_acquire);
    for (std::uint32_t i = 0; i < n; ++i) {
      const char* name = names_[i].load(std::memory_order_relaxed);
      const std::uint64_t value = values_[i].load(std::memory_order_relaxed);
      bool found = false;
      for (NamedCounter& t : *totals) {
        if (std::strcmp(t.name, name) == 0) {
          t.value += value;
          found = true;
          break;
        }
      }
      if (!found) totals->push_back(NamedCounter{name, value});
    }
  }

 private:
  std::atomic<const char*> names_[kMaxChannelCounters] = {};
  std::atomic<std::uint64_t> values_[kMaxChannelCounters] = {};
  std::atomic<std::uint32_t> count_{0};
};

}  // namespace sparcoll::transport
