// The op slots of a handler: a power-of-two ring of operation states, reused round-robin by
// operation number, each busy from its submission until the handler completes it
// (common/request_state.hpp: release_slot). The calling thread waits for a slot to come free
// before it fills it, so at most size() operations of a handler are in flight. Both handlers
// keep theirs here: block-sparse ops (block_sparse::Engine) and collectives (coll::Executor).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace sparcoll::runtime {

// The slot count for max_inflight operations in flight: the next power of two. Op numbers are
// 32-bit and wrap; a power-of-two count divides 2^32, so consecutive numbers keep mapping to
// consecutive slots across the wrap (and block-sparse aggregators' 2x slots stay collision-free).
inline std::uint32_t op_slot_count(std::uint32_t max_inflight) noexcept {
  std::uint32_t n = 1;
  while (n < max_inflight) n <<= 1;
  return n;
}

// Op: any state with a `std::atomic<std::uint32_t> busy` (1 while in flight).
template <class Op>
class OpSlots {
 public:
  explicit OpSlots(std::uint32_t max_inflight) {
    const std::uint32_t n = op_slot_count(max_inflight);
    slots_.reserve(n);
    for (std::uint32_t i = 0; i < n; ++i) slots_.push_back(std::make_unique<Op>());
  }

  std::uint32_t size() const noexcept { return static_cast<std::uint32_t>(slots_.size()); }
  // The slot operation `number` maps to.
  Op& operator[](std::uint64_t number) noexcept { return *slots_[number & (slots_.size() - 1)]; }
  const Op& operator[](std::uint64_t number) const noexcept { return *slots_[number & (slots_.size() - 1)]; }
  // That slot, once its previous operation is complete.
  Op& wait_free(std::uint64_t number) {
    Op& op = (*this)[number];
    while (op.busy.load(std::memory_order_acquire) != 0) op.busy.wait(1, std::memory_order_acquire);
    return op;
  }
  bool all_free() const noexcept {
    for (const auto& op : slots_)
      if (op->busy.load(std::memory_order_acquire) != 0) return false;
    return true;
  }
  // Waits until every operation is complete (teardown).
  void wait_all_free() const {
    for (const auto& op : slots_)
      while (op->busy.load(std::memory_order_acquire) != 0) op->busy.wait(1, std::memory_order_acquire);
  }

 private:
  std::vector<std::unique_ptr<Op>> slots_;
};

}  // namespace sparcoll::runtime
