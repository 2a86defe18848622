// broadcast, allgather and reduce_scatter for the torch backend, one function each.
//
// sparcoll's own ibroadcast / iallgather / ireduce_scatter are being added to
// sparcoll::Communicator; until then each function here runs on iallreduce, exactly:
//   broadcast  = sum of the root's words and zeros from everyone else,
//   allgather  = sum of W slots, rank r filling only slot r,
//   reduce_scatter = the full allreduce, of which each rank keeps its own chunk.
// Data moves as i32 words: an integer sum with zeros returns every bit pattern unchanged (NaN
// payloads, -0.0, int64, bool), so any torch dtype goes through, and blocks that are zero on
// every rank still cost nothing. When the native calls land, each body becomes that call on the
// same words (see docs/pytorch.md, "Where the native collectives plug in").
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include <sparcoll/communicator.hpp>

namespace sparcoll_torch {

// A collective in flight and what to run once it succeeded (copy out of staging memory); the
// staging memory lives in `finish`'s captures until then.
struct Started {
  sparcoll::Request request;
  std::function<void()> finish;  // may be empty
};

// `data` (bytes long) on `root` is copied into `data` on every rank.
Started start_broadcast(sparcoll::Communicator& comm, void* data, std::size_t bytes, int root);

// recv[r] (bytes long) receives rank r's `send` (bytes long); recv has size() entries.
Started start_allgather(sparcoll::Communicator& comm, const void* send, std::size_t bytes, std::vector<void*> recv);

// recv (count elements) receives chunk rank() of reduce(send over ranks); send is size() * count.
Started start_reduce_scatter(sparcoll::Communicator& comm, const void* send, void* recv, std::size_t count,
                             sparcoll::DataType dtype, sparcoll::ReduceOp op);

}  // namespace sparcoll_torch
