#include "byte_collectives.hpp"

#include <cstdint>
#include <cstring>
#include <mutex>

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

// Staging buffers are kept and reused: a fresh multi-MiB vector costs a page fault per 4 KiB and
// a zero fill on every call (about 1 ms for 8 MiB on this host), more than the copy through it.
// A few are kept, none larger than kKeptBytes; they are taken and given back from the calling
// and the completion threads, hence the mutex (per collective, not per element).
class StagingPool {
 public:
  std::shared_ptr<Words> take(std::size_t words) {
    std::unique_ptr<Words> buffer;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      // The smallest kept buffer that is big enough, else the biggest (it grows once).
      std::size_t pick = kept_.size();
      for (std::size_t i = 0; i < kept_.size(); ++i) {
        const std::size_t have = kept_[i]->size();
        if (pick == kept_.size()) {
          pick = i;
          continue;
        }
        const std::size_t best = kept_[pick]->size();
        if ((have >= words && (best < words || have < best)) || (best < words && have > best)) pick = i;
      }
      if (pick < kept_.size()) {
        buffer = std::move(kept_[pick]);
        kept_.erase(kept_.begin() + static_cast<std::ptrdiff_t>(pick));
      }
    }
    if (!buffer) buffer = std::make_unique<Words>();
    // Never shrunk: resizing back up would zero-fill again.
    if (buffer->size() < words) buffer->resize(words);
    return std::shared_ptr<Words>(buffer.release(), [this](Words* w) { give(w); });
  }

 private:
  static constexpr std::size_t kKept = 4;
  static constexpr std::size_t kKeptBytes = std::size_t{64} << 20;

  void give(Words* w) {
    std::unique_ptr<Words> owned(w);
    if (owned->size() * kWord > kKeptBytes) return;
    std::lock_guard<std::mutex> lock(mutex_);
    if (kept_.size() < kKept) kept_.push_back(std::move(owned));
  }

  std::mutex mutex_;
  std::vector<std::unique_ptr<Words>> kept_;
};

std::shared_ptr<Words> staging_words(std::size_t words) {
  static StagingPool* pool = new StagingPool;  // never destroyed: buffers may come back at exit
  return pool->take(words);
}

}  // namespace

std::shared_ptr<void> staging_buffer(std::size_t bytes) {
  std::shared_ptr<Words> words = staging_words(words_for(bytes));
  return std::shared_ptr<void>(words, words->data());  // aliases: keeps the vector, points at its data
}

namespace {

// `bytes` from src into the words at `at`; the padding of a last partial word is zeroed (a
// reused buffer holds an earlier call's bytes there).
void put(std::int32_t* at, const void* src, std::size_t bytes) {
  if (bytes % kWord != 0) at[bytes / kWord] = 0;
  if (bytes > 0) std::memcpy(at, src, bytes);
}

}  // namespace

Started start_broadcast(sparcoll::Communicator& comm, void* data, std::size_t bytes, int root) {
  const std::size_t words = words_for(bytes);
  Started s;
  if (word_ready(data, bytes)) {
    s.request = comm.ibroadcast(data, words, sparcoll::DataType::i32, root);
    return s;
  }
  auto staging = staging_words(words);
  if (comm.rank() == root) put(staging->data(), data, bytes);
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
  auto staging = staging_words(per_rank * ranks);
  std::int32_t* own = staging->data() + per_rank * rank;
  put(own, send, bytes);
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
    auto staging = staging_words(per_rank);
    put(staging->data(), send, bytes);
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
  auto staging = staging_words(per_rank * ranks);
  std::int32_t* own = staging->data() + per_rank * rank;
  put(own, send, bytes);
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
    out = staging_words(per_rank);
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
      in = staging_words(per_rank * ranks);
      for (std::size_t r = 0; r < ranks; ++r) put(in->data() + r * per_rank, send[r], bytes);
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
