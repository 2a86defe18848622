// Who serves which lane: the job's processes, aggregators and progress threads.
//
// Processes: workers are 0..W-1 (their rank), dedicated aggregators W..W+M-1. With M == 0
// (co-located mode) every worker also aggregates. Lane l goes to aggregator l % A (A = M or W)
// and, inside every process, to progress thread (l / A) % T, so one thread of a worker talks
// to the same-numbered thread of each aggregator.
#pragma once

#include <cstdint>
#include <string>

namespace sparcoll::block_sparse {

struct JobLayout {
  std::uint32_t workers = 1;
  std::uint32_t dedicated = 0;  // M dedicated aggregator processes (0 = co-located)
  std::uint32_t self = 0;       // this process's index
  std::uint32_t lanes = 1;
  std::uint32_t threads = 1;

  std::uint32_t processes() const noexcept { return workers + dedicated; }
  std::uint32_t aggregator_count() const noexcept { return dedicated ? dedicated : workers; }
  bool is_worker(std::uint32_t p) const noexcept { return p < workers; }
  bool self_is_worker() const noexcept { return is_worker(self); }
  bool self_aggregates() const noexcept { return dedicated == 0 || self >= workers; }
  std::uint32_t aggregator_of_lane(std::uint32_t lane) const noexcept {
    const std::uint32_t a = lane % aggregator_count();
    return dedicated ? workers + a : a;
  }
  std::uint32_t thread_of_lane(std::uint32_t lane) const noexcept {
    return (lane / aggregator_count()) % threads;
  }
  std::string name(std::uint32_t p) const {
    return is_worker(p) ? "rank " + std::to_string(p) : "aggregator " + std::to_string(p - workers);
  }
};

}  // namespace sparcoll::block_sparse
