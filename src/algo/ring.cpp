// Dense ring allreduce (Patarasuk & Yuan): a reduce-scatter ring in which every rank ends up
// owning one fully reduced chunk, then an allgather ring that passes the owned chunks around.
// 2(n-1)/n of the data per rank on the wire, n-1 latency terms per phase: the bandwidth-
// optimal choice for large dense tensors.
//
// A large tensor goes round in segments (p2p_algorithms.hpp, ring_segment_elems), one ring per
// segment, one after another: the chunk a step reduces is the one the next step sends, and a
// chunk of a 2 MiB segment is still in the cache when it is sent; one of a 100 MiB tensor's four
// is not.
// The segments change which rank reduces an element, so the segment size is a setting every
// rank shares (SPARCOLL_RING_SEGMENT_BYTES), checked when the job starts.
#include <algorithm>
#include <cstring>

#include "algo/p2p_algorithms.hpp"
#include "block/reduce.hpp"

namespace sparcoll::algo {

namespace {

std::uint32_t mod(std::int64_t x, std::uint32_t n) { return static_cast<std::uint32_t>(((x % n) + n) % n); }

// Reduce-scatter over accumulators `acc` (count elements of acc_type). At step s rank r sends
// chunk (r - s + shift) and reduces chunk (r - s - 1 + shift) received from its left; after
// n-1 steps it owns chunk (r + 1 + shift), fully reduced. Tags [tag0, tag0 + n-1).
Task reduce_scatter_phase(p2p::Peers& peers, std::byte* acc, std::size_t count, DataType acc_type, ReduceOp op,
                          std::int64_t shift, std::uint32_t tag0) {
  const std::uint32_t n = peers.size(), r = peers.rank();
  const std::uint32_t right = (r + 1) % n, left = (r + n - 1) % n;
  const std::size_t es = block::acc_size(acc_type);
  for (std::uint32_t s = 0; s + 1 < n; ++s) {
    const std::uint32_t out = mod(std::int64_t{r} - s + shift, n), in = mod(std::int64_t{r} - s - 1 + shift, n);
    const std::size_t ob = chunk_begin(count, n, out), oe = chunk_begin(count, n, out + 1);
    const std::size_t ib = chunk_begin(count, n, in), ie = chunk_begin(count, n, in + 1);
    peers.send(right, tag0 + s, acc + ob * es, (oe - ob) * es);
    peers.recv_reduce(left, tag0 + s, acc + ib * es, ie - ib, acc_type, op);
    if (Status st = co_await peers.wait(); !st.ok()) co_return st;
  }
  co_return Status();
}

// Allgather of byte chunks: rank r starts with chunk (r + shift) complete in `buf`.
Task allgather_phase(p2p::Peers& peers, std::byte* buf, std::size_t count, std::size_t elem, std::int64_t shift,
                     std::uint32_t tag0) {
  const std::uint32_t n = peers.size(), r = peers.rank();
  const std::uint32_t right = (r + 1) % n, left = (r + n - 1) % n;
  for (std::uint32_t s = 0; s + 1 < n; ++s) {
    const std::uint32_t out = mod(std::int64_t{r} - s + shift, n), in = mod(std::int64_t{r} - s - 1 + shift, n);
    const std::size_t ob = chunk_begin(count, n, out), oe = chunk_begin(count, n, out + 1);
    const std::size_t ib = chunk_begin(count, n, in), ie = chunk_begin(count, n, in + 1);
    peers.send(right, tag0 + s, buf + ob * elem, (oe - ob) * elem);
    peers.recv(left, tag0 + s, buf + ib * elem, (ie - ib) * elem);
    if (Status st = co_await peers.wait(); !st.ok()) co_return st;
  }
  co_return Status();
}

// The accumulators for `count` elements: the output buffer itself when the dtype is its own
// accumulator type (f32, i32), else scratch.
std::byte* accumulators(void* recv, std::size_t count, DataType dtype, Scratch& scratch) {
  if (dtype == DataType::f32 || dtype == DataType::i32 || dtype_is_wide(dtype)) return static_cast<std::byte*>(recv);
  if (scratch.acc.size() < count * 4) scratch.acc.resize(count * 4);
  return scratch.acc.data();
}

}  // namespace

std::size_t ring_segment_elems(std::size_t count, std::uint32_t n, std::size_t acc_bytes, std::size_t segment_bytes) {
  if (segment_bytes == 0 || n < 2 || count == 0) return std::max<std::size_t>(count, 1);
  const std::size_t max_segments = (kRingTags - 1) / (2 * (std::size_t{n} - 1));  // the last tag: the count
  if (max_segments < 2) return count;
  const std::size_t fewest = count / max_segments + (count % max_segments != 0);
  return std::max({segment_bytes / acc_bytes, std::size_t{n}, fewest});
}

Task ring_allreduce(p2p::Peers& peers, const void* send, void* recv, std::size_t count, DataType dtype,
                    ReduceOp op, std::size_t segment_bytes, Scratch& scratch) {
  const std::uint32_t n = peers.size(), r = peers.rank();
  const DataType acc_type = p2p::acc_type_of(dtype);
  std::byte* acc = accumulators(recv, count, dtype, scratch);
  if (acc != send) block::acc_load(dtype, send, acc, count);
  const std::size_t esize = dtype_size(dtype), es = block::acc_size(acc_type);
  auto* out = static_cast<std::byte*>(recv);
  const std::uint32_t own = (r + 1) % n;
  // Round (and divide, for avg) the owned chunk of [first, first + len) once; everyone else
  // receives these bytes.
  auto store_own = [&](std::size_t first, std::size_t len) {
    const std::size_t b = first + chunk_begin(len, n, own), e = first + chunk_begin(len, n, own + 1);
    block::acc_store(dtype, op, acc + b * es, e - b, n, out + b * esize);
  };
  if (n == 1) {
    store_own(0, count);
    co_return Status();
  }
  const std::size_t segment = ring_segment_elems(count, n, es, segment_bytes);
  const std::size_t segments = count == 0 ? 1 : (count + segment - 1) / segment;  // a count of 0 goes round once
  auto first_of = [&](std::size_t k) { return std::min(k * segment, count); };
  auto len_of = [&](std::size_t k) { return first_of(k + 1) - first_of(k); };
  auto tag0_of = [n](std::size_t k) { return static_cast<std::uint32_t>(k * 2 * (n - 1)); };

  // Counts that differ across ranks can leave the segments a rank shares with its left
  // neighbour alike in size, one of the two going round segments the other never starts (8 and
  // 12 segments of 4 elements): the first step carries the count when there are segments.
  const std::uint32_t right = (r + 1) % n, left = (r + n - 1) % n;
  const bool send_count = segment_bytes != 0 && count >= segment;
  const std::uint64_t my_count = count;
  std::uint64_t left_count = count;
  if (send_count) {
    peers.send(right, kRingTags - 1, &my_count, sizeof my_count);
    peers.recv(left, kRingTags - 1, &left_count, sizeof left_count);
  }

  // One ring per segment, each with tags of its own.
  for (std::size_t k = 0; k < segments; ++k) {
    std::byte* seg_acc = acc + first_of(k) * es;
    if (Status st = co_await reduce_scatter_phase(peers, seg_acc, len_of(k), acc_type, op, 0, tag0_of(k)); !st.ok())
      co_return st;
    if (left_count != count)
      co_return Status(ErrorCode::mismatch, peers.what() + ": rank " + std::to_string(left) + " passed " +
                                                std::to_string(left_count) + " elements, this rank " +
                                                std::to_string(count) + " (counts differ across ranks)");
    store_own(first_of(k), len_of(k));
    if (Status st = co_await allgather_phase(peers, out + first_of(k) * esize, len_of(k), esize, 1, tag0_of(k) + n - 1);
        !st.ok())
      co_return st;
  }
  co_return Status();
}

Task ring_reduce_scatter(p2p::Peers& peers, const void* send, void* recv, std::size_t count, DataType dtype,
                         ReduceOp op, Scratch& scratch) {
  const std::uint32_t n = peers.size(), r = peers.rank();
  const std::size_t total = count * n, es = block::acc_size(dtype);
  if (scratch.acc.size() < total * es) scratch.acc.resize(total * es);
  std::byte* acc = scratch.acc.data();
  block::acc_load(dtype, send, acc, total);
  if (n > 1) {
    if (Status s = co_await reduce_scatter_phase(peers, acc, total, p2p::acc_type_of(dtype), op, -1, 0); !s.ok())
      co_return s;
  }
  block::acc_store(dtype, op, acc + std::size_t{r} * count * es, count, n, recv);
  co_return Status();
}

// The reduce-scatter ring leaves rank p owning chunk p (shift -1), fully reduced; each rank
// rounds its chunk once and sends it to the root, which then commits (as gather does, rooted.cpp):
// no rank returns success unless every rank took part alike, and a root that differs across
// ranks is a mismatch in the first ring step (every fragment carries its sender's root).
// Bandwidth-optimal like the ring allreduce, with half its steps.
Task ring_reduce(p2p::Peers& peers, const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op,
                 std::uint32_t root, Scratch& scratch) {
  const std::uint32_t n = peers.size(), r = peers.rank();
  const std::size_t esize = dtype_size(dtype), es = block::acc_size(dtype);
  if (scratch.acc.size() < count * es) scratch.acc.resize(count * es);
  std::byte* acc = scratch.acc.data();
  block::acc_load(dtype, send, acc, count);
  if (n > 1) {
    if (Status s = co_await reduce_scatter_phase(peers, acc, count, p2p::acc_type_of(dtype), op, -1, 0); !s.ok())
      co_return s;
  }
  const std::uint32_t data_tag = n - 1, commit_tag = n;
  const std::size_t b = chunk_begin(count, n, r), e = chunk_begin(count, n, r + 1);
  if (r != root) {
    if (scratch.tmp.size() < (e - b) * esize) scratch.tmp.resize((e - b) * esize);
    block::acc_store(dtype, op, acc + b * es, e - b, n, scratch.tmp.data());
    peers.send(root, data_tag, scratch.tmp.data(), (e - b) * esize);
    peers.recv(root, commit_tag, nullptr, 0);
    co_return co_await peers.wait();
  }
  auto* out = static_cast<std::byte*>(recv);
  block::acc_store(dtype, op, acc + b * es, e - b, n, out + b * esize);
  for (std::uint32_t p = 0; p < n; ++p) {
    if (p == root) continue;
    const std::size_t pb = chunk_begin(count, n, p), pe = chunk_begin(count, n, p + 1);
    peers.recv(p, data_tag, out + pb * esize, (pe - pb) * esize);
  }
  if (Status s = co_await peers.wait(); !s.ok()) co_return s;
  for (std::uint32_t p = 0; p < n; ++p)
    if (p != root) peers.send(p, commit_tag, nullptr, 0);
  co_return co_await peers.wait();
}

Task ring_allgather(p2p::Peers& peers, const void* send, void* recv, std::size_t bytes) {
  const std::uint32_t n = peers.size(), r = peers.rank();
  auto* out = static_cast<std::byte*>(recv);
  if (bytes != 0 && out + std::size_t{r} * bytes != send) std::memmove(out + std::size_t{r} * bytes, send, bytes);
  if (n == 1) co_return Status();
  co_return co_await allgather_phase(peers, out, bytes * n, 1, 0, 0);
}

}  // namespace sparcoll::algo
