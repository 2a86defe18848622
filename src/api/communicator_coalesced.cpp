// allreduce_coalesced and allgather_coalesced (communicator.hpp): the caller's buffers packed
// back to back into one collective, a small max-allreduce beside it that checks every rank named
// the same counts and nobody a bad argument, and the copy out when the request is finished.
//
// Why pack instead of a collective over a list of buffers: the algorithms, the block scan and
// the wire all work on one contiguous tensor, and one collective of the sum of the sizes costs
// one latency instead of n (the reason callers coalesce). The copy in and out is a pass over
// memory that the collective's own passes dwarf.
#include <cstring>
#include <limits>
#include <memory>
#include <string>

#include "api/coalesced.hpp"
#include "api/communicator_impl.hpp"

namespace sparcoll {

namespace {

// FNV-1a over n and the counts, in 30 bits: its negation fits an int32 too.
std::int32_t layout_hash(const std::size_t* counts, std::size_t n) {
  std::uint32_t h = 2166136261u;
  auto mix = [&h](std::uint64_t v) {
    for (int i = 0; i < 8; ++i, v >>= 8) h = (h ^ static_cast<std::uint8_t>(v)) * 16777619u;
  };
  mix(n);
  for (std::size_t i = 0; i < n; ++i) mix(counts[i]);
  return static_cast<std::int32_t>(h & 0x3fffffffu);
}

std::string describe_layout(const std::size_t* counts, std::size_t n) {
  std::string text = std::to_string(n) + (n == 1 ? " buffer" : " buffers");
  if (n == 0) return text;
  text += " of ";
  for (std::size_t i = 0; i < n && i < 8; ++i) text += (i ? ", " : "") + std::to_string(counts[i]);
  if (n > 8) text += ", ...";
  return text + " elements";
}

// The packed buffer and the pieces, or the first bad argument in c->problem (the packed buffer
// then still has this rank's size when it is known, so the collective runs alike everywhere).
void pack(detail::Coalesced* c, const void* const* send, void* const* recv, const std::size_t* counts,
          std::size_t n, DataType dtype) {
  const std::string call = c->call;
  if (n > 0 && counts == nullptr) {
    c->problem = "counts is null with n " + std::to_string(n);
    return;
  }
  c->layout = describe_layout(counts, n);
  if (!dtype_valid(static_cast<std::uint8_t>(dtype))) {
    c->problem = "dtype " + std::to_string(static_cast<int>(dtype)) + " is not one of f32, f16, bf16, i32, f64, i64";
    return;
  }
  const std::size_t esize = dtype_size(dtype);
  const auto ranks = static_cast<std::size_t>(c->gathers ? c->ranks : 1);
  std::size_t elements = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (counts[i] > std::numeric_limits<std::size_t>::max() / esize / ranks - elements) {
      c->problem = "counts[" + std::to_string(i) + "] " + std::to_string(counts[i]) + " makes the total overflow";
      return;
    }
    elements += counts[i];
  }
  c->rank_bytes = elements * esize;
  if (n > 0 && send == nullptr) c->problem = "send is null with n " + std::to_string(n);
  if (n > 0 && recv == nullptr && c->problem.empty()) c->problem = "recv is null with n " + std::to_string(n);
  for (std::size_t i = 0; i < n && c->problem.empty(); ++i) {
    if (counts[i] > 0 && send[i] == nullptr) c->problem = "send[" + std::to_string(i) + "] is null with count " + std::to_string(counts[i]);
    else if (counts[i] > 0 && recv[i] == nullptr)
      c->problem = "recv[" + std::to_string(i) + "] is null with count " + std::to_string(counts[i]);
  }
  try {
    c->packed.assign(c->rank_bytes * ranks, std::byte{0});
  } catch (const std::bad_alloc&) {
    c->problem = "rank " + std::to_string(c->rank) + " is out of memory for the packed buffer of " +
                 std::to_string(c->rank_bytes * ranks) + " bytes";
    c->rank_bytes = 0;
    return;
  }
  if (!c->problem.empty()) return;
  std::byte* at = c->packed.data() + (c->gathers ? static_cast<std::size_t>(c->rank) * c->rank_bytes : 0);
  c->pieces.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t bytes = counts[i] * esize;
    if (bytes > 0) std::memcpy(at, send[i], bytes);
    at += bytes;
    c->pieces[i] = detail::Coalesced::Piece{static_cast<std::byte*>(recv[i]), bytes};
  }
}

// The agreement words, issued before the collective on every rank (same order everywhere).
void start_agreement(Communicator& comm, detail::Coalesced* c, const std::size_t* counts, std::size_t n) {
  const std::int32_t h = counts == nullptr && n > 0 ? 0 : layout_hash(counts, n);
  c->layout_hash = h;
  c->agreement = {h, -h, c->problem.empty() ? 0 : c->rank + 1};
  c->agreement_request = comm.iallreduce(c->agreement.data(), c->agreement.data(), c->agreement.size(), DataType::i32,
                                         ReduceOp::max, Algorithm::recursive_doubling);
}

}  // namespace

Request Communicator::iallreduce_coalesced(const void* const* send, void* const* recv, const std::size_t* counts,
                                           std::size_t n, DataType dtype, ReduceOp op) {
  auto c = std::make_shared<detail::Coalesced>();
  c->call = "allreduce_coalesced";
  c->rank = rank();
  c->ranks = size();
  pack(c.get(), send, recv, counts, n, dtype);
  start_agreement(*this, c.get(), counts, n);
  const std::size_t esize = dtype_valid(static_cast<std::uint8_t>(dtype)) ? dtype_size(dtype) : 1;
  Request request = iallreduce(c->packed.data(), c->packed.data(), c->rank_bytes / esize, dtype, op);
  request.coalesced_ = std::move(c);
  return request;
}

OpStats Communicator::allreduce_coalesced(const void* const* send, void* const* recv, const std::size_t* counts,
                                          std::size_t n, DataType dtype, ReduceOp op) {
  Request request = iallreduce_coalesced(send, recv, counts, n, dtype, op);
  request.wait();
  return request.stats();
}

Request Communicator::iallgather_coalesced(const void* const* send, void* const* recv, const std::size_t* counts,
                                           std::size_t n, DataType dtype) {
  auto c = std::make_shared<detail::Coalesced>();
  c->call = "allgather_coalesced";
  c->gathers = true;
  c->rank = rank();
  c->ranks = size();
  pack(c.get(), send, recv, counts, n, dtype);
  start_agreement(*this, c.get(), counts, n);
  const std::size_t esize = dtype_valid(static_cast<std::uint8_t>(dtype)) ? dtype_size(dtype) : 1;
  std::byte* mine = c->packed.data() + static_cast<std::size_t>(c->rank) * c->rank_bytes;
  Request request = iallgather(mine, c->packed.data(), c->rank_bytes / esize, dtype);
  request.coalesced_ = std::move(c);
  return request;
}

void Communicator::allgather_coalesced(const void* const* send, void* const* recv, const std::size_t* counts,
                                       std::size_t n, DataType dtype) {
  iallgather_coalesced(send, recv, counts, n, dtype).wait();
}

Status Request::finish_coalesced(const Status& collective) {
  const std::shared_ptr<detail::Coalesced> c = std::move(coalesced_);  // finished once
  const std::string call = c->call;
  const std::int32_t own_hash = c->layout_hash;
  Status agreed;
  if (c->agreement_request.state_) agreed = detail::CommunicatorImpl::wait(*c->agreement_request.state_);
  Status result = collective;
  if (!c->problem.empty()) {
    result = Status(ErrorCode::invalid_argument, call + ": " + c->problem);
  } else if (agreed.ok() && c->agreement[2] > 0) {
    result = Status(ErrorCode::invalid_argument, call + ": rank " + std::to_string(c->agreement[2] - 1) +
                                                     " gave an invalid argument (its own error says which)");
  } else if (agreed.ok() && (c->agreement[0] != own_hash || c->agreement[1] != -own_hash)) {
    result = Status(ErrorCode::mismatch, call + ": the buffers' counts differ across ranks (this rank gave " +
                                             c->layout + ")");
  } else if (!agreed.ok() && collective.ok()) {
    result = agreed;
  } else if (collective.ok()) {
    // Every rank's pieces, in rank order, into each recv buffer (allreduce: the one result).
    const std::size_t ranks = c->gathers ? static_cast<std::size_t>(c->ranks) : 1;
    for (std::size_t r = 0; r < ranks; ++r) {
      const std::byte* from = c->packed.data() + r * c->rank_bytes;
      for (const detail::Coalesced::Piece& piece : c->pieces) {
        if (piece.bytes > 0) std::memcpy(piece.recv + r * piece.bytes, from, piece.bytes);
        from += piece.bytes;
      }
    }
  }
  state_->status = result;
  return result;
}

}  // namespace sparcoll
