// Bad calls that the library rejects at op level: one rank (the last, the "culprit") or every
// rank passes something wrong, every rank gets invalid_argument or mismatch, and the communicator
// stays usable (docs/errors.md). A soak runs them between good calls so that the error paths,
// where a leaked buffer or a stale slot is easiest to miss, run thousands of times too.
#include <vector>

#include "calls.hpp"

namespace sparcoll::soak {

namespace {

enum class Fault {
  sparse_unsorted,       // the culprit's indices are not sorted
  compressed_bad_k,      // k > count on every rank
  null_send,             // the culprit's send buffer is null (block-sparse)
  count_mismatch,        // the culprit's count differs (block-sparse)
  ring_count_mismatch,   // the same on the collective thread
  allgather_count_mismatch,
};

// The faults that a world of this size can stage (a mismatch needs two ranks).
std::vector<Fault> faults(int world) {
  std::vector<Fault> f = {Fault::sparse_unsorted, Fault::compressed_bad_k, Fault::null_send};
  if (world >= 2) f.insert(f.end(), {Fault::count_mismatch, Fault::ring_count_mismatch, Fault::allgather_count_mismatch});
  return f;
}

const char* name(Fault f) {
  switch (f) {
    case Fault::sparse_unsorted: return "unsorted sparse indices on one rank";
    case Fault::compressed_bad_k: return "compressed k > count";
    case Fault::null_send: return "null send buffer on one rank";
    case Fault::count_mismatch: return "block-sparse count mismatch";
    case Fault::ring_count_mismatch: return "ring count mismatch";
    case Fault::allgather_count_mismatch: return "allgather count mismatch";
  }
  return "?";
}

// A tensor id of its own: the soak's good calls never use it, so its size never conflicts.
constexpr std::uint64_t kRejectedTensor = 199;

}  // namespace

int fault_count(int world) { return static_cast<int>(faults(world).size()); }

std::string fault_name(int world, int fault) { return name(faults(world)[static_cast<std::size_t>(fault)]); }

std::string run_rejected(Context& ctx, Slot& s, const Call& c) {
  const Fault fault = faults(ctx.world)[static_cast<std::size_t>(c.fault)];
  const bool culprit = ctx.rank == ctx.world - 1;
  constexpr std::size_t kCount = 1000;
  s.send.assign((kCount + 1) * sizeof(float), std::byte{0});
  s.recv.assign((kCount + 1) * sizeof(float) * static_cast<std::size_t>(ctx.world), std::byte{0});
  Communicator& comm = ctx.comm;
  try {
    switch (fault) {
      case Fault::sparse_unsorted: {
        const std::vector<std::int64_t> good = {1, 2, 3}, bad = {5, 3, 9};
        const float values[3] = {1, 2, 3};
        comm.allreduce_sparse(culprit ? bad.data() : good.data(), values, 3, 100, DataType::f32, ReduceOp::sum,
                              &s.sparse, Algorithm::ssar_split_allgather);
        break;
      }
      case Fault::compressed_bad_k: {
        Compression z;
        z.algo = CompressionAlgo::topk_allgather;
        z.k = 2 * kCount;
        comm.allreduce_compressed(kRejectedTensor, reinterpret_cast<const float*>(s.send.data()),
                                  reinterpret_cast<float*>(s.recv.data()), kCount, z);
        break;
      }
      case Fault::null_send:
        comm.allreduce(culprit ? nullptr : s.send.data(), s.recv.data(), kCount, DataType::f32, ReduceOp::sum,
                       Algorithm::block_sparse);
        break;
      case Fault::count_mismatch:
      case Fault::ring_count_mismatch:
        comm.allreduce(s.send.data(), s.send.data(), culprit ? kCount + 1 : kCount, DataType::f32, ReduceOp::sum,
                       fault == Fault::ring_count_mismatch ? Algorithm::ring : Algorithm::block_sparse);
        break;
      case Fault::allgather_count_mismatch:
        comm.allgather(s.send.data(), s.recv.data(), culprit ? kCount + 1 : kCount, DataType::f32);
        break;
    }
  } catch (const Error& e) {
    if (e.code() == ErrorCode::invalid_argument || e.code() == ErrorCode::mismatch) return std::string();
    return "rank " + std::to_string(ctx.rank) + ": " + name(fault) + ": unexpected error: " + e.what();
  }
  return "rank " + std::to_string(ctx.rank) + ": " + name(fault) + " was accepted (" + c.describe() + ")";
}

}  // namespace sparcoll::soak
