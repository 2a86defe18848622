#include "byte_collectives.hpp"

#include <cstdint>
#include <cstring>

namespace sparcoll_torch {
namespace {

using Words = std::vector<std::int32_t>;
constexpr std::size_t kWord = sizeof(std::int32_t);

std::size_t words_for(std::size_t bytes) { return (bytes + kWord - 1) / kWord; }

// The caller's memory can travel as i32 words without a copy.
bool word_ready(const void* p, std::size_t bytes) {
  return bytes % kWord == 0 && reinterpret_cast<std::uintptr_t>(p) % kWord == 0;
}

bool overlaps(const void* a, std::size_t abytes, const void* b, std::size_t bbytes) {
  const auto x = reinterpret_cast<std::uintptr_t>(a), y = reinterpret_cast<std::uintptr_t>(b);
  return abytes && bbytes && x < y + bbytes && y < x + abytes;
}

}  // namespace

Started start_broadcast(sparcoll::Communicator& comm, void* data, std::size_t bytes, int root) {
  const std::size_t words = words_for(bytes);
  Started s;
  if (word_ready(data, bytes)) {
    s.request = comm.ibroadcast(data, words, sparcoll::DataType::i32, root);
    return s;
  }
  auto staging = std::make_shared<Words>(words, 0);
  if (comm.rank() == root && bytes > 0) std::memcpy(staging->data(), data, bytes);
  s.request = comm.ibroadcast(staging->data(), words, sparcoll::DataType::i32, root);
  s.finish = [staging, data, bytes, root, rank = comm.rank()] {
    if (rank != root && bytes > 0) std::memcpy(data, staging->data(), bytes);
  };
  return s;
}

Started start_allgather(sparcoll::Communicator& comm, const void* send, std::size_t bytes, std::vector<void*> recv) {
  const std::size_t per_rank = words_for(bytes);
  const auto ranks = static_cast<std::size_t>(comm.size());
  const auto rank = static_cast<std::size_t>(comm.rank());
  Started s;
  bool direct = !recv.empty() && word_ready(send, bytes) && word_ready(recv[0], bytes);
  for (std::size_t r = 1; r < ranks && direct; ++r)
    direct = recv[r] == static_cast<std::byte*>(recv[0]) + r * bytes;
  // sparcoll takes a send inside recv only as this rank's own slot (in place).
  if (direct && send != recv[rank]) direct = !overlaps(send, bytes, recv[0], bytes * ranks);
  if (direct) {
    s.request = comm.iallgather(send, recv[0], per_rank, sparcoll::DataType::i32);
    return s;
  }
  auto staging = std::make_shared<Words>(per_rank * ranks, 0);
  std::int32_t* own = staging->data() + per_rank * rank;
  if (bytes > 0) std::memcpy(own, send, bytes);
  s.request = comm.iallgather(own, staging->data(), per_rank, sparcoll::DataType::i32);  // in place
  s.finish = [staging, recv = std::move(recv), bytes, per_rank, ranks] {
    for (std::size_t r = 0; r < ranks && bytes > 0; ++r) std::memcpy(recv[r], staging->data() + r * per_rank, bytes);
  };
  return s;
}

Started start_gather(sparcoll::Communicator& comm, const void* send, std::size_t bytes, std::vector<void*> recv,
                     int root) {
  const std::size_t per_rank = words_for(bytes);
  const auto ranks = static_cast<std::size_t>(comm.size());
  const auto rank = static_cast<std::size_t>(comm.rank());
  Started s;
  if (comm.rank() != root) {
    if (word_ready(send, bytes)) {
      s.request = comm.igather(send, nullptr, per_rank, sparcoll::DataType::i32, root);
      return s;
    }
    auto staging = std::make_shared<Words>(per_rank, 0);
    if (bytes > 0) std::memcpy(staging->data(), send, bytes);
    s.request = comm.igather(staging->data(), nullptr, per_rank, sparcoll::DataType::i32, root);
    s.finish = [staging] {};
    return s;
  }
  bool direct = !recv.empty() && word_ready(send, bytes) && word_ready(recv[0], bytes);
  for (std::size_t r = 1; r < ranks && direct; ++r)
    direct = recv[r] == static_cast<std::byte*>(recv[0]) + r * bytes;
  if (direct && send != recv[rank]) direct = !overlaps(send, bytes, recv[0], bytes * ranks);
  if (direct) {
    s.request = comm.igather(send, recv[0], per_rank, sparcoll::DataType::i32, root);
    return s;
  }
  auto staging = std::make_shared<Words>(per_rank * ranks, 0);
  std::int32_t* own = staging->data() + per_rank * rank;
  if (bytes > 0) std::memcpy(own, send, bytes);
  s.request = comm.igather(own, staging->data(), per_rank, sparcoll::DataType::i32, root);  // in place
  s.finish = [staging, recv = std::move(recv), bytes, per_rank, ranks] {
    for (std::size_t r = 0; r < ranks && bytes > 0; ++r) std::memcpy(recv[r], staging->data() + r * per_rank, bytes);
  };
  return s;
}

Started start_scatter(sparcoll::Communicator& comm, std::vector<const void*> send, void* recv, std::size_t bytes,
                      int root) {
  const std::size_t per_rank = words_for(bytes);
  const auto ranks = static_cast<std::size_t>(comm.size());
  Started s;
  // This rank's piece: straight into recv when it can take words, else through staging.
  std::shared_ptr<Words> out;
  void* dst = recv;
  if (!word_ready(recv, bytes)) {
    out = std::make_shared<Words>(per_rank, 0);
    dst = out->data();
  }
  std::shared_ptr<Words> in;
  const void* src = nullptr;
  if (comm.rank() == root) {
    bool direct = !send.empty() && word_ready(send[0], bytes);
    for (std::size_t r = 1; r < ranks && direct; ++r)
      direct = send[r] == static_cast<const std::byte*>(send[0]) + r * bytes;
    if (direct && dst != send[static_cast<std::size_t>(root)])
      direct = !overlaps(dst, bytes, send[0], bytes * ranks);
    if (direct) {
      src = send[0];
    } else {
      in = std::make_shared<Words>(per_rank * ranks, 0);
      for (std::size_t r = 0; r < ranks && bytes > 0; ++r) std::memcpy(in->data() + r * per_rank, send[r], bytes);
      src = in->data();
    }
  }
  s.request = comm.iscatter(src, dst, per_rank, sparcoll::DataType::i32, root);
  if (out || in)
    s.finish = [out, in, recv, bytes] {
      if (out && bytes > 0) std::memcpy(recv, out->data(), bytes);
    };
  return s;
}

Started start_reduce_scatter(sparcoll::Communicator& comm, const void* send, void* recv, std::size_t count,
                             sparcoll::DataType dtype, sparcoll::ReduceOp op) {
  const std::size_t chunk = count * sparcoll::dtype_size(dtype);
  const auto ranks = static_cast<std::size_t>(comm.size());
  Started s;
  if (!overlaps(send, chunk * ranks, recv, chunk)) {
    s.request = comm.ireduce_scatter(send, recv, count, dtype, op);
    return s;
  }
  // The output is a view of the input: sparcoll needs them apart.
  auto copy = std::make_shared<std::vector<std::byte>>(chunk * ranks);
  std::memcpy(copy->data(), send, copy->size());
  s.request = comm.ireduce_scatter(copy->data(), recv, count, dtype, op);
  s.finish = [copy] {};
  return s;
}

}  // namespace sparcoll_torch
