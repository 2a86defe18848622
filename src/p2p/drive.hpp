// Runs a collective (a Task over Peers, common/task.hpp) to its end on this thread: starts it,
// and while it is suspended polls the channel for what it awaits and resumes it when that has
// happened, following the runtime's idle policy when nothing moves. The calling thread uses it
// for a collective it runs itself (Executor::run_here), and tests; the collective thread steps
// collectives round by round in its progress loop instead (coll/executor.cpp).
#pragma once

#include "common/task.hpp"
#include "p2p/peers.hpp"
#include "runtime/idle_policy.hpp"

namespace sparcoll::p2p {

inline Status drive(Peers& peers, Task& task) {
  runtime::IdlePolicy idle(0, peers.oversubscribed());
  task.start();
  while (!task.done()) {
    if (peers.ready()) {
      peers.resume();
      idle.moved();
    } else if (peers.progress()) {
      idle.moved();
    } else {
      (void)idle.empty_round();
      idle.wait(peers.idle());
    }
  }
  return task.result();
}

}  // namespace sparcoll::p2p
