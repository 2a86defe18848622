// One create/destroy cycle: a second communicator joins (rendezvous, connections, shared memory,
// threads), runs an allreduce on the collective thread and one on the engine, checks both, and
// is destroyed. Whatever it took from the process must be given back.
#pragma once

#include <cstdint>
#include <string>

#include "sparcoll/sparcoll.hpp"

namespace sparcoll::soak {

// "" or what was wrong. Throws sparcoll::Error when the communicator cannot be made.
std::string run_cycle(const Options& options, std::uint64_t cycle);

}  // namespace sparcoll::soak
