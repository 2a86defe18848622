// all_to_all, send/recv around the ring, and allreduce_coalesced: started, finished, checked.
#include <array>
#include <cstring>

#include "calls.hpp"

namespace sparcoll::soak {

namespace {

std::string wrong(const Call& call, const std::string& what) { return "wrong result: " + call.describe() + ": " + what; }

constexpr int kRingTag = 7;

// allreduce_coalesced: the tensor cut into 1 element, nothing, half the rest and the rest.
std::array<std::size_t, 4> pieces(std::size_t count) {
  const std::size_t a = count < 1 ? count : 1, b = (count - a) / 2;
  return {a, 0, b, count - a - b};
}

}  // namespace

void start_exchange(Context& ctx, Slot& s, const Call& c) {
  Communicator& comm = ctx.comm;
  const std::size_t esize = dtype_size(c.dtype), bytes = c.count * esize;
  const auto world = static_cast<std::size_t>(ctx.world);
  switch (c.kind) {
    case Kind::all_to_all: {
      perf::generate(workload_of(ctx, c, c.count * world), ctx.rank, &s.send);
      poison(&s.recv, bytes * world);
      if (c.nonblocking) s.request = comm.iall_to_all(s.send.data(), s.recv.data(), bytes);
      else comm.all_to_all(s.send.data(), s.recv.data(), bytes);
      return;
    }
    case Kind::p2p: {
      // Each rank to its right neighbour; the recv is posted first, so even a blocking send
      // finds it (a send also completes without one: the receiver keeps early messages).
      perf::generate(workload_of(ctx, c, c.count), ctx.rank, &s.send);
      poison(&s.recv, bytes);
      const int right = (ctx.rank + 1) % ctx.world, left = (ctx.rank + ctx.world - 1) % ctx.world;
      s.request = comm.irecv(s.recv.data(), bytes, left, kRingTag);
      comm.send(s.send.data(), bytes, right, kRingTag);
      return;
    }
    case Kind::coalesced: {
      perf::generate(workload_of(ctx, c, c.count), ctx.rank, &s.send);
      if (!c.in_place) poison(&s.recv, bytes);
      const std::array<std::size_t, 4> counts = pieces(c.count);
      std::array<const void*, 4> in{};
      std::array<void*, 4> out{};
      std::size_t at = 0;
      for (std::size_t i = 0; i < counts.size(); ++i) {
        in[i] = s.send.data() + at;
        out[i] = (c.in_place ? s.send.data() : s.recv.data()) + at;
        at += counts[i] * esize;
      }
      if (c.nonblocking)
        s.request = comm.iallreduce_coalesced(in.data(), out.data(), counts.data(), counts.size(), c.dtype, c.op);
      else
        comm.allreduce_coalesced(in.data(), out.data(), counts.data(), counts.size(), c.dtype, c.op);
      return;
    }
    default: return;
  }
}

std::string finish_exchange(Context& ctx, Slot& s, const Call& c, bool check) {
  if (s.request.valid()) s.request.wait();
  s.request = Request();
  const std::size_t bytes = c.count * dtype_size(c.dtype);
  const auto world = static_cast<std::size_t>(ctx.world);
  std::string what;
  switch (c.kind) {
    case Kind::all_to_all: {
      if (!check) return std::string();
      for (int p = 0; p < ctx.world; ++p) {
        perf::generate(workload_of(ctx, c, c.count * world), p, &s.want);
        const std::byte* want = s.want.data() + bytes * static_cast<std::size_t>(ctx.rank);
        const std::byte* got = s.recv.data() + bytes * static_cast<std::size_t>(p);
        if (bytes > 0 && std::memcmp(got, want, bytes) != 0) return wrong(c, "the piece from rank " + std::to_string(p) + " differs");
      }
      return std::string();
    }
    case Kind::p2p: {
      if (!check) return std::string();
      perf::generate(workload_of(ctx, c, c.count), (ctx.rank + ctx.world - 1) % ctx.world, &s.want);
      if (bytes > 0 && std::memcmp(s.recv.data(), s.want.data(), bytes) != 0) return wrong(c, "the message differs");
      return std::string();
    }
    case Kind::coalesced: {
      const std::vector<std::byte>& got = c.in_place ? s.send : s.recv;
      ctx.fold(got.data(), bytes);
      if (!check) return std::string();
      perf::reference(workload_of(ctx, c, c.count), c.op, &s.want);
      const std::size_t n = perf::count_wrong(got, s.want, c.dtype, &what);
      return n == 0 ? std::string() : wrong(c, std::to_string(n) + " wrong elements, first " + what);
    }
    default: return std::string();
  }
}

}  // namespace sparcoll::soak
