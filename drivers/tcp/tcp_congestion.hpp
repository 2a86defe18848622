// The congestion control of the tcp transport's connections (SPARCOLL_TCP_CONGESTION).
//
// Why the transport chooses it: a pacing algorithm (bbr) sends at its estimate of the path's
// bandwidth, released by a timer when the interface has no fq qdisc (loopback never has one).
// Collective traffic is bursts: once bbr has left its start-up, a 1 MiB allreduce between two
// processes of one host took 0.5 ms instead of 0.3 and a 100 MiB one 62-64 ms instead of 52,
// every burst waiting for the pacing timer. Between processes of one host there is no queue for
// pacing to protect, so `auto` keeps those connections off bbr; connections to other hosts keep
// what the administrator chose for the network.
//
// The choice is made before the socket connects or listens (an accepted socket inherits the
// listener's): the kernel turns pacing on for a socket when bbr starts on it, and switching
// algorithms later leaves it on.
#pragma once

#include <string>

#include "sparcoll/status.hpp"

namespace sparcoll::transport::tcp {

// Applies `setting` ("auto", "system" or an algorithm name) to `fd`, a socket about to connect
// or listen. `peers_local`: every process at the far end of its connections runs on this host.
// `what` names the socket in errors and logs ("the connection to rank 3 (10.0.0.2:4000)").
// A name the kernel refuses is an error naming SPARCOLL_TCP_CONGESTION; under auto, a refusal
// leaves the socket as it was.
Status choose_congestion_control(int fd, const std::string& setting, bool peers_local, const std::string& what);

}  // namespace sparcoll::transport::tcp
