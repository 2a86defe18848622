// reduce, gather and scatter: started, finished, checked. The root's buffer is the only one the
// call may touch: the other ranks pass null for it, as they may.
#include <cstring>

#include "calls.hpp"

namespace sparcoll::soak {

namespace {

std::string wrong(const Call& call, const std::string& what) { return "wrong result: " + call.describe() + ": " + what; }

}  // namespace

void start_rooted(Context& ctx, Slot& s, const Call& c) {
  Communicator& comm = ctx.comm;
  const std::size_t bytes = c.count * dtype_size(c.dtype);
  const auto world = static_cast<std::size_t>(ctx.world);
  const bool root = ctx.rank == c.root;
  switch (c.kind) {
    case Kind::reduce: {
      perf::generate(workload_of(ctx, c, c.count), ctx.rank, &s.send);
      void* out = nullptr;
      if (root) {
        poison(&s.recv, bytes);
        out = c.in_place ? s.send.data() : s.recv.data();
      }
      if (c.nonblocking) s.request = comm.ireduce(s.send.data(), out, c.count, c.dtype, c.op, c.root);
      else comm.reduce(s.send.data(), out, c.count, c.dtype, c.op, c.root);
      return;
    }
    case Kind::gather: {
      perf::generate(workload_of(ctx, c, c.count), ctx.rank, &s.send);
      void* out = nullptr;
      const void* in = s.send.data();
      if (root) {
        poison(&s.recv, bytes * world);
        out = s.recv.data();
        if (c.in_place) {
          std::byte* mine = s.recv.data() + bytes * static_cast<std::size_t>(ctx.rank);
          if (bytes > 0) std::memcpy(mine, s.send.data(), bytes);
          in = mine;
        }
      }
      if (c.nonblocking) s.request = comm.igather(in, out, c.count, c.dtype, c.root);
      else comm.gather(in, out, c.count, c.dtype, c.root);
      return;
    }
    case Kind::scatter: {
      const void* in = nullptr;
      poison(&s.recv, bytes);
      void* out = s.recv.data();
      if (root) {
        perf::generate(workload_of(ctx, c, c.count * world), ctx.rank, &s.send);
        in = s.send.data();
        if (c.in_place) out = s.send.data() + bytes * static_cast<std::size_t>(ctx.rank);
      }
      if (c.nonblocking) s.request = comm.iscatter(in, out, c.count, c.dtype, c.root);
      else comm.scatter(in, out, c.count, c.dtype, c.root);
      return;
    }
    default: return;
  }
}

std::string finish_rooted(Context& ctx, Slot& s, const Call& c, bool check) {
  if (s.request.valid()) s.request.wait();
  s.request = Request();
  const std::size_t bytes = c.count * dtype_size(c.dtype);
  const auto world = static_cast<std::size_t>(ctx.world);
  const bool root = ctx.rank == c.root;
  // Only the root (reduce, gather) or each rank its own piece (scatter) holds a result: nothing
  // is folded into the hash that every rank must share.
  if (!check) return std::string();
  std::string what;
  switch (c.kind) {
    case Kind::reduce: {
      if (!root) return std::string();
      perf::reference(workload_of(ctx, c, c.count), c.op, &s.want);
      s.recv.resize(bytes);  // poisoned to this size; out of place it holds the result
      const std::vector<std::byte>& got = c.in_place ? s.send : s.recv;
      const std::size_t n = perf::count_wrong(got, s.want, c.dtype, &what);
      return n == 0 ? std::string() : wrong(c, std::to_string(n) + " wrong elements, first " + what);
    }
    case Kind::gather: {
      if (!root) return std::string();
      for (int r = 0; r < ctx.world; ++r) {
        perf::generate(workload_of(ctx, c, c.count), r, &s.want);
        const std::byte* got = s.recv.data() + bytes * static_cast<std::size_t>(r);
        if (bytes > 0 && std::memcmp(got, s.want.data(), bytes) != 0)
          return wrong(c, "rank " + std::to_string(r) + "'s piece differs");
      }
      return std::string();
    }
    case Kind::scatter: {
      perf::generate(workload_of(ctx, c, c.count * world), c.root, &s.want);
      const std::byte* want = s.want.data() + bytes * static_cast<std::size_t>(ctx.rank);
      const std::byte* got = root && c.in_place ? s.send.data() + bytes * static_cast<std::size_t>(ctx.rank) : s.recv.data();
      if (bytes > 0 && std::memcmp(got, want, bytes) != 0) return wrong(c, "this rank's piece differs");
      return std::string();
    }
    default: return std::string();
  }
}

}  // namespace sparcoll::soak
