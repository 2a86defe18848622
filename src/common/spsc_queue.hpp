// Single-producer single-consumer bounded queue: the calling thread hands ops to a progress
// thread without locks. Capacity is fixed at construction.
#pragma once

#include <atomic>
#include <cstddef>
#include <vector>

namespace sparcoll {

template <typename T>
class SpscQueue {
 public:
  explicit SpscQueue(std::size_t capacity) : items_(capacity + 1) {}

  bool push(const T& item) noexcept {
    const std::size_t tail = tail_.load(std::memory_order_relaxed);
    const std::size_t next = (tail + 1) % items_.size();
    if (next == head_.load(std::memory_order_acquire)) return false;
    items_[tail] = item;
    tail_.store(next, std::memory_order_release);
    return true;
  }

  bool pop(T* item) noexcept {
    const std::size_t head = head_.load(std::memory_order_relaxed);
    if (head == tail_.load(std::memory_order_acquire)) return false;
    *item = items_[head];
    head_.store((head + 1) % items_.size(), std::memory_order_release);
    return true;
  }

  // Consumer side: nothing to pop right now.
  bool empty() const noexcept {
    return head_.load(std::memory_order_relaxed) == tail_.load(std::memory_order_acquire);
  }

 private:
  std::vector<T> items_;
  alignas(64) std::atomic<std::size_t> head_{0};
  alignas(64) std::atomic<std::size_t> tail_{0};
};

}  // namespace sparcoll
