// What a Request sees of one operation: done, its status and its stats. Every runtime that runs
// operations (the block-sparse progress threads, the collective thread) completes it; the API's
// Request waits on it. It outlives the runtime's op slot (the slot is reused once the op is done).
#pragma once

#include <atomic>
#include <cstdint>

#include "sparcoll/communicator.hpp"
#include "sparcoll/status.hpp"

namespace sparcoll::detail {

struct RequestState {
  std::atomic<std::uint32_t> done{0};  // 1 when finished; waited on with atomic::wait
  Status status;                       // written before done is set
  OpStats stats;
};

}  // namespace sparcoll::detail
