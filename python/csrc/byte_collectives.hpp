// broadcast, allgather, gather, scatter and reduce_scatter for the torch backend, one function
// each, on sparcoll's native ibroadcast / iallgather / igather / iscatter / ireduce_scatter (the
// communicator's collective thread).
//
// broadcast, allgather, gather and scatter move bytes: the data travels as i32 words, which they copy without
// looking at them, so every torch dtype (int64, bool, float64, NaN payloads, -0.0) arrives bit
// for bit. The word count depends on the byte count only (ceil(bytes / 4)), so every rank passes
// the same count whatever its buffer's address; a buffer whose size is not a multiple of 4 bytes
// or whose address is not 4-byte aligned goes through a padded staging copy on this rank only.
// reduce_scatter runs on the caller's buffers with the real dtype and op.
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

// A staging buffer of at least `bytes` bytes (16-byte aligned), taken from a small pool of kept
// buffers and given back when the last reference goes: a fresh multi-MiB buffer per call costs a
// page fault per 4 KiB and a zero fill, more than the copy through it. Its contents are stale.
std::shared_ptr<void> staging_buffer(std::size_t bytes);

// `data` (bytes long) on `root` is copied into `data` on every rank.
Started start_broadcast(sparcoll::Communicator& comm, void* data, std::size_t bytes, int root);

// recv[r] (bytes long) receives rank r's `send` (bytes long); recv has size() entries. When they
// are consecutive slots of one buffer (recv[r] == recv[0] + r * bytes) the result lands there
// directly, else in a staging buffer first.
Started start_allgather(sparcoll::Communicator& comm, const void* send, std::size_t bytes, std::vector<void*> recv);

// On `root`, recv[r] (bytes long) receives rank r's `send`; recv has size() entries there and is
// empty elsewhere. Consecutive word-aligned slots receive directly, others through staging.
Started start_gather(sparcoll::Communicator& comm, const void* send, std::size_t bytes, std::vector<void*> recv,
                     int root);
// recv (bytes long) on rank r receives `send[r]` of `root`; send has size() entries on the root
// and is empty elsewhere.
Started start_scatter(sparcoll::Communicator& comm, std::vector<const void*> send, void* recv, std::size_t bytes,
                      int root);
// recv (count elements) receives chunk rank() of reduce(send over ranks); send is size() * count.
// A recv inside send (a view of the input) reduces from a copy of send.
Started start_reduce_scatter(sparcoll::Communicator& comm, const void* send, void* recv, std::size_t count,
                             sparcoll::DataType dtype, sparcoll::ReduceOp op);

}  // namespace sparcoll_torch
