// Whether the processes of an shm job may read each other's memory (process_vm_readv needs the
// same user and no ptrace restriction such as Yama's scope 2-3 or a seccomp filter): decided at
// setup, the same on every process of the job.
#pragma once

#include <cstdint>
#include <vector>

#include "sparcoll/status.hpp"
#include "transport/driver.hpp"
#include "transport/setup_util.hpp"

namespace sparcoll::transport::shm {

// Every process publishes the address of a word of its own whose value is `probe_value`, reads
// every peer's (peer_pids in ctx.peers order), and publishes whether it could; *enabled is true
// only when every process of the job could and none has SPARCOLL_SHM_PEER_READS=off.
Status agree_on_peer_reads(const DriverContext& ctx, const std::vector<std::int64_t>& peer_pids, const void* probe,
                           std::uint64_t probe_value, const SetupDeadline& deadline, bool* enabled);

}  // namespace sparcoll::transport::shm
