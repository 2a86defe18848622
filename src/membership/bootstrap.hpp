// Joining a job: rendezvous through the store, learning every process, checking that all of
// them run with the same configuration, choosing the transport; and leaving it cleanly.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "control/store.hpp"
#include "sparcoll/options.hpp"
#include "transport/driver.hpp"

namespace sparcoll::membership {

struct Membership {
  std::unique_ptr<control::StoreServer> server;  // rank 0 hosts the store unless SPARCOLL_STORE_SERVER=external
  std::unique_ptr<control::Store> store;         // null for a single-process job
  std::vector<transport::ProcessInfo> processes;
  std::uint32_t self = 0;
  std::uint32_t workers = 1;
  std::uint32_t dedicated = 0;
  std::string key_prefix;
  std::uint32_t job_epoch = 1;
  std::string transport;                // resolved: never "auto"
  std::uint32_t local_processes = 1;    // processes of this job on this host

  std::uint32_t total() const noexcept { return workers + dedicated; }
};

// Rendezvous. Fails with mismatch when processes disagree on a setting that must be equal,
// naming the setting, its variable and both values.
Status join(const Options& options, Membership* out);

// Teardown barrier: returns when every process has arrived (or the timeout passed). A process
// whose communicator broke only counts itself out: some peers may never arrive. `failure` is
// asked while it waits (every 100 ms): a non-ok answer (a peer died after the last collective,
// seen by the progress threads) ends the wait, since that peer will never arrive either.
Status leave(Membership& m, const Options& options, bool broken, const std::function<Status()>& failure = {});

// Dedicated aggregators: waits up to timeout_ms for every worker to have left.
// Returns timeout while workers are still running.
Status wait_for_workers_to_leave(Membership& m, std::uint32_t timeout_ms);

// This host's identity (hostname + boot id).
std::string host_identity();

}  // namespace sparcoll::membership
