// One collective in flight, shared between the calling thread (which prepares it) and the
// progress threads (which run its lanes). The calling thread fills every field, then hands the
// pointer to the progress threads through their submission queues (release/acquire); afterwards each progress thread
// touches only its own lanes and its own stats entry, and the last progress thread to finish publishes the
// outcome to the RequestState.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "common/request_state.hpp"
#include "proto/wire.hpp"
#include "transport/driver.hpp"
#include "sparcoll/communicator.hpp"
#include "sparcoll/status.hpp"

namespace sparcoll::block_sparse {

using detail::RequestState;
using Clock = std::chrono::steady_clock;

// Worker side of one lane of one op.
struct WorkerLane {
  std::uint64_t advertised_next = 0;  // the next non-zero block this worker promised to send (or kEnd)
  std::uint64_t filled_until = 0;     // out-of-place: lane blocks below this are written in recv
  bool done = true;
  bool started = false;
  bool send_pending = false;          // a window (or abort) is built but the channel was full
  std::uint16_t window_blocks = 0;    // blocks in the pending window
  std::uint32_t lane = 0;
};

struct OpState {
  // --- set by the calling thread before submission -------------------------------------------
  std::uint32_t op_id = 0;
  const std::byte* send = nullptr;
  std::byte* recv = nullptr;
  bool in_place = false;
  proto::Geometry geometry;
  ReduceOp redop = ReduceOp::sum;
  bool abort = false;                  // a local failure: tell the aggregators, then fail
  ErrorCode abort_code = ErrorCode::invalid_argument;  // bad arguments, or no_resource (memory)
  std::string abort_reason;
  Clock::time_point deadline;
  std::vector<std::uint64_t> bitmap;   // non-zero blocks (capacity reused across ops)
  // Hybrid allreduce: stripes of stripe_blocks blocks whose bit is set in dense_stripes go the
  // dense way on the collective thread; their bits in `bitmap` are cleared and block-sparse
  // leaves their part of recv alone. stripe_blocks 0: no stripe is dense.
  std::uint32_t stripe_blocks = 0;
  // The hybrid's collective thread sleeps on request->done with a raw futex wait: the engine
  // then wakes it with futex_wake as well as notify_all.
  bool wake_raw = false;
  std::vector<std::uint64_t> dense_stripes;
  bool in_dense_stripe(std::uint64_t block) const noexcept {
    if (stripe_blocks == 0) return false;
    const std::uint64_t s = block / stripe_blocks;
    return (dense_stripes[s / 64] >> (s % 64)) & 1;
  }
  // Hybrid allreduce with kept tables: the result blocks each progress thread received, per
  // stripe of counted_stripe_blocks blocks (row t of `stripe_results`: thread t), which the last
  // thread to finish sums into stripe_results_out[stripe]. Every rank receives every block some
  // rank sent, so the sums are the stripes' exact union counts, the same on every rank, without
  // reading the result again. counted_stripe_blocks 0: not counted.
  std::uint32_t counted_stripe_blocks = 0;
  std::uint32_t counted_stripes = 0;
  std::vector<std::uint32_t> stripe_results;
  std::uint32_t* stripe_results_out = nullptr;
  std::vector<WorkerLane> lanes;       // every lane; each progress thread uses only its own
  std::vector<std::byte> scratch;      // per lane: header + window indices (64 + 8*fusion bytes)
  transport::UserMemory user_memory;   // `send` registered for zero-copy sends; len 0 = copy
  std::shared_ptr<RequestState> request;

  // --- progress threads ------------------------------------------------------------------------
  std::atomic<std::uint32_t> threads_left{0};
  std::vector<OpStats> thread_stats;    // one entry per progress thread
  std::vector<std::uint32_t> thread_lanes_left;  // one entry per progress thread
  std::atomic<bool> failed{false};
  std::mutex error_mutex;              // taken once per failure, never on the data path
  Status error;

  // --- slot ownership ------------------------------------------------------------------------
  std::atomic<std::uint32_t> busy{0};  // 1 from submission until the last progress thread finished

  // Records the op's first failure (later ones are dropped).
  void fail(Status status) {
    std::lock_guard<std::mutex> lock(error_mutex);
    if (!failed.load(std::memory_order_relaxed)) {
      error = std::move(status);
      failed.store(true, std::memory_order_release);
    }
  }
};

}  // namespace sparcoll::block_sparse
