// Running and checking one call of each kind. A call is started (a blocking call returns done, a
// non-blocking one stays in flight in its slot's request), then finished: its request waited for
// and, when asked, its result compared with a reference that every rank computes on its own from
// the seeds (workload.hpp's values are small multiples of 1/2, so every order of addition of
// every algorithm is exact and results must match bit for bit).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "mix.hpp"
#include "sparcoll/sparcoll.hpp"
#include "workload.hpp"

namespace sparcoll::soak {

// Buffers of one call in flight, reused from call to call. They are sized and touched once, at
// the largest a call can need (presize), so the soak's own memory is resident from the start and
// constant: RSS that grows afterwards is not the soak's buffers reaching a new high-water mark.
struct Slot {
  std::vector<std::byte> send, recv, want, scratch;
  std::vector<std::int64_t> indices;
  std::vector<float> before;  // compressed: the residual before the call
  std::vector<std::uint8_t> mask;
  SparseResult sparse;
  Request request;
  bool registered = false;
};

// The largest a slot's buffers get: `bytes` for one tensor (send, recv, want), `scratch_bytes`
// (an allgather of compressed sends), `sparse_elements` (indices, mask, a sparse result),
// `compressed_elements` (a residual).
struct SlotSizes {
  std::size_t bytes = 0, scratch_bytes = 0, sparse_elements = 0, compressed_elements = 0;
};
void presize(Slot* slot, const SlotSizes& sizes);

// What every call needs: the communicator and the running hash of the results that must be
// identical on every rank (compared across ranks at every sample).
struct Context {
  Communicator& comm;
  int rank = 0;
  int world = 1;
  std::uint64_t hash = 0xcbf29ce484222325ull;
  void fold(const void* data, std::size_t bytes);
};

// The seeded tensor spec of a call with `count` elements.
perf::WorkloadSpec workload_of(const Context& ctx, const Call& call, std::size_t count);
// Fills `buffer` with `bytes` of a pattern no result has, so an element a call forgets to write
// is caught.
void poison(std::vector<std::byte>* buffer, std::size_t bytes);

// allreduce, broadcast, allgather, reduce_scatter (dense_calls.cpp).
void start_dense(Context& ctx, Slot& slot, const Call& call);
std::string finish_dense(Context& ctx, Slot& slot, const Call& call, bool check);

// reduce, gather, scatter (rooted_calls.cpp).
void start_rooted(Context& ctx, Slot& slot, const Call& call);
std::string finish_rooted(Context& ctx, Slot& slot, const Call& call, bool check);

// all_to_all, send/recv around the ring, allreduce_coalesced (exchange_calls.cpp).
void start_exchange(Context& ctx, Slot& slot, const Call& call);
std::string finish_exchange(Context& ctx, Slot& slot, const Call& call, bool check);

// allreduce_sparse (sparse_call.cpp).
void start_sparse(Context& ctx, Slot& slot, const Call& call);
std::string finish_sparse(Context& ctx, Slot& slot, const Call& call, bool check);

// allreduce_compressed (compressed_call.cpp): a fixed table of tensors, each with its id, size
// and compression. The communicator keeps a residual per id for its whole life, so a soak uses a
// bounded set of ids, as a training loop does (a fresh id per call would grow by design).
struct CompressedTensor {
  std::uint64_t id = 0;
  std::size_t count = 0;
  Compression compression;
};
std::vector<CompressedTensor> compressed_tensors(std::size_t max_bytes);
void start_compressed(Context& ctx, Slot& slot, const Call& call, const CompressedTensor& tensor);
// Checks conservation: with error feedback what left every rank (acc - residual after) summed
// over ranks is the result; it gathers those vectors, so every rank must call it with the same
// `check`.
std::string finish_compressed(Context& ctx, Slot& slot, const Call& call, const CompressedTensor& tensor, bool check);

// Bad calls that fail at op level on every rank and leave the communicator usable
// (rejected_call.cpp): the error paths must not leak either.
int fault_count(int world);
std::string fault_name(int world, int fault);
// Runs the bad call; "" when every rank got the error it should.
std::string run_rejected(Context& ctx, Slot& slot, const Call& call);

}  // namespace sparcoll::soak
