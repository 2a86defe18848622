#include "byte_collectives.hpp"

#include <cstdint>
#include <cstring>

namespace sparcoll_torch {
namespace {

using Words = std::vector<std::int32_t>;

std::size_t words_for(std::size_t bytes) { return (bytes + sizeof(std::int32_t) - 1) / sizeof(std::int32_t); }

}  // namespace

Started start_broadcast(sparcoll::Communicator& comm, void* data, std::size_t bytes, int root) {
  // Native: comm.ibroadcast(words->data(), words->size(), DataType::i32, root).
  auto words = std::make_shared<Words>(words_for(bytes), 0);
  if (comm.rank() == root && bytes > 0) std::memcpy(words->data(), data, bytes);
  Started s;
  s.request = comm.iallreduce(words->data(), words->data(), words->size(), sparcoll::DataType::i32,
                              sparcoll::ReduceOp::sum);
  s.finish = [words, data, bytes, root, rank = comm.rank()] {
    if (rank != root && bytes > 0) std::memcpy(data, words->data(), bytes);
  };
  return s;
}

Started start_allgather(sparcoll::Communicator& comm, const void* send, std::size_t bytes, std::vector<void*> recv) {
  // Native: comm.iallgather(own words, all words, per_rank, DataType::i32).
  const std::size_t per_rank = words_for(bytes);
  const auto ranks = static_cast<std::size_t>(comm.size());
  auto words = std::make_shared<Words>(per_rank * ranks, 0);
  if (bytes > 0) std::memcpy(words->data() + per_rank * static_cast<std::size_t>(comm.rank()), send, bytes);
  Started s;
  s.request = comm.iallreduce(words->data(), words->data(), words->size(), sparcoll::DataType::i32,
                              sparcoll::ReduceOp::sum);
  s.finish = [words, recv = std::move(recv), bytes, per_rank, ranks] {
    for (std::size_t r = 0; r < ranks && bytes > 0; ++r) std::memcpy(recv[r], words->data() + r * per_rank, bytes);
  };
  return s;
}

Started start_reduce_scatter(sparcoll::Communicator& comm, const void* send, void* recv, std::size_t count,
                             sparcoll::DataType dtype, sparcoll::ReduceOp op) {
  // Native: comm.ireduce_scatter(send, recv, count, dtype, op), with no staging at all.
  const std::size_t chunk = count * sparcoll::dtype_size(dtype);
  const auto ranks = static_cast<std::size_t>(comm.size());
  // A copy, so `send` (the caller's input list, flattened) is not overwritten by the result.
  auto full = std::make_shared<std::vector<std::byte>>(chunk * ranks);
  if (!full->empty()) std::memcpy(full->data(), send, full->size());
  Started s;
  s.request = comm.iallreduce(full->data(), full->data(), count * ranks, dtype, op);
  s.finish = [full, recv, chunk, rank = static_cast<std::size_t>(comm.rank())] {
    if (chunk > 0) std::memcpy(recv, full->data() + rank * chunk, chunk);
  };
  return s;
}

}  // namespace sparcoll_torch
