// SPARCOLL_TRANSPORT=auto: which transport a job runs on, from the driver registry and what every
// process can run. One host: shm. Across hosts: the most preferred driver whose descriptor says
// auto may choose it (rdma, tcp) and that every process found usable; tcp when none is common.
// Every process decides from the same exchanged lists, so they all reach the same choice.
#pragma once

#include <string>
#include <vector>

#include "transport/driver.hpp"

namespace sparcoll::membership {

// The drivers auto may choose across hosts that this process can run now, most preferred first,
// comma-separated ("rdma,tcp"): published with the process's identity at join.
std::string auto_candidates_here();

// The transport for a job of `processes`, where `candidates[i]` is what process i published.
// `why` says how it was chosen, for the log.
std::string choose_auto_transport(const std::vector<transport::ProcessInfo>& processes,
                                  const std::vector<std::string>& candidates, std::string* why);

}  // namespace sparcoll::membership
