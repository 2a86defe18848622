// Runs a collective (a Task over Peers, common/task.hpp) to its end on this thread: starts it,
// and while it is suspended polls the channel for what it awaits and resumes it when that has
// happened, backing off when nothing moves. The thread that owns the channel at that moment
// calls it: the collective thread, or the calling thread for a collective it runs itself.
#pragma once

#include "common/task.hpp"
#include "p2p/peers.hpp"

namespace sparcoll::p2p {

inline Status drive(Peers& peers, Task& task) {
  task.start();
  while (!task.done()) {
    if (peers.ready()) {
      peers.resume();
      continue;
    }
    if (!peers.progress()) peers.back_off();
  }
  return task.result();
}

}  // namespace sparcoll::p2p
