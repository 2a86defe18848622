// What a Request sees of one operation: done, its status and its stats. Every runtime that runs
// operations (the block-sparse progress threads, the collective thread) completes it; the API's
// Request waits on it. It outlives the runtime's op slot (the slot is reused once the op is done).
#pragma once

#include <atomic>
#include <cstdint>

#include "common/futex.hpp"
#include "sparcoll/communicator.hpp"
#include "sparcoll/status.hpp"

namespace sparcoll::detail {

struct RequestState {
  std::atomic<std::uint32_t> done{0};  // 1 when finished; waited on with atomic::wait
  Status status;                       // written before done is set
  OpStats stats;
};

// The end of an operation, the same for every handler: its op slot is given back first (a
// caller waiting for a slot may start the next op in it at once), then its request is done
// (status and stats were written before). `futex_waiter`: someone sleeps on `done` with a raw
// futex (futex.hpp), whom notify_all may not wake.
inline void release_slot(std::atomic<std::uint32_t>& slot_busy) noexcept {
  slot_busy.store(0, std::memory_order_release);
  slot_busy.notify_all();
}

inline void complete(RequestState& request, const Status& status, bool futex_waiter = false) {
  request.status = status;
  request.done.store(1, std::memory_order_release);
  request.done.notify_all();
  if (futex_waiter) futex_wake(&request.done);
}

}  // namespace sparcoll::detail
