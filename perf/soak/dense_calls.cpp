// allreduce (every algorithm), broadcast, allgather and reduce_scatter: started, finished, checked.
#include <cstring>

#include "calls.hpp"

namespace sparcoll::soak {

namespace {

// Byte-exact comparison of `bytes` at `got` with `want`; "" or the first differing element.
std::string compare_bytes(const std::byte* got, const std::byte* want, std::size_t bytes, DataType dtype) {
  if (bytes == 0 || std::memcmp(got, want, bytes) == 0) return std::string();
  const std::size_t esize = dtype_size(dtype);
  std::size_t wrong = 0, first = 0;
  for (std::size_t at = 0; at < bytes; at += esize)
    if (std::memcmp(got + at, want + at, esize) != 0 && wrong++ == 0) first = at / esize;
  return std::to_string(wrong) + " wrong elements, first element " + std::to_string(first);
}

std::string wrong(const Call& call, const std::string& what) { return "wrong result: " + call.describe() + ": " + what; }

}  // namespace

void Context::fold(const void* data, std::size_t bytes) {
  // 8 bytes at a time (a byte-wise FNV-1a costs as much as the 16 MiB collectives themselves).
  const auto* p = static_cast<const unsigned char*>(data);
  std::size_t at = 0;
  for (; at + 8 <= bytes; at += 8) {
    std::uint64_t w;
    std::memcpy(&w, p + at, 8);
    hash = (hash ^ w) * 0x100000001b3ull;
    hash ^= hash >> 29;
  }
  for (; at < bytes; ++at) hash = (hash ^ p[at]) * 0x100000001b3ull;
  hash = (hash ^ bytes) * 0x100000001b3ull;
}

perf::WorkloadSpec workload_of(const Context& ctx, const Call& call, std::size_t count) {
  perf::WorkloadSpec spec;
  spec.count = count;
  spec.dtype = call.dtype;
  spec.density = call.density;
  spec.block_elems = ctx.comm.options().block_elems;
  spec.pattern = call.pattern;
  spec.seed = call.seed;
  spec.world_size = ctx.world;
  return spec;
}

void poison(std::vector<std::byte>* buffer, std::size_t bytes) { buffer->assign(bytes, std::byte{0x7b}); }

void start_dense(Context& ctx, Slot& s, const Call& c) {
  Communicator& comm = ctx.comm;
  const std::size_t bytes = c.count * dtype_size(c.dtype);
  switch (c.kind) {
    case Kind::allreduce: {
      perf::generate(workload_of(ctx, c, c.count), ctx.rank, &s.send);
      void* out = s.send.data();
      if (!c.in_place) {
        poison(&s.recv, bytes);
        out = s.recv.data();
      }
      if (c.register_send && bytes > 0) {
        comm.register_buffer(s.send.data(), bytes);
        s.registered = true;
      }
      if (c.nonblocking) s.request = comm.iallreduce(s.send.data(), out, c.count, c.dtype, c.op, c.algo);
      else comm.allreduce(s.send.data(), out, c.count, c.dtype, c.op, c.algo);
      return;
    }
    case Kind::broadcast: {
      if (ctx.rank == c.root) perf::generate(workload_of(ctx, c, c.count), c.root, &s.send);
      else poison(&s.send, bytes);
      if (c.nonblocking) s.request = comm.ibroadcast(s.send.data(), c.count, c.dtype, c.root);
      else comm.broadcast(s.send.data(), c.count, c.dtype, c.root);
      return;
    }
    case Kind::allgather: {
      perf::generate(workload_of(ctx, c, c.count), ctx.rank, &s.send);
      poison(&s.recv, bytes * static_cast<std::size_t>(ctx.world));
      const std::byte* in = s.send.data();
      if (c.in_place) {
        std::byte* mine = s.recv.data() + bytes * static_cast<std::size_t>(ctx.rank);
        std::memcpy(mine, s.send.data(), bytes);
        in = mine;
      }
      if (c.nonblocking) s.request = comm.iallgather(in, s.recv.data(), c.count, c.dtype);
      else comm.allgather(in, s.recv.data(), c.count, c.dtype);
      return;
    }
    case Kind::reduce_scatter: {
      perf::generate(workload_of(ctx, c, c.count * static_cast<std::size_t>(ctx.world)), ctx.rank, &s.send);
      poison(&s.recv, bytes);
      if (c.nonblocking) s.request = comm.ireduce_scatter(s.send.data(), s.recv.data(), c.count, c.dtype, c.op);
      else comm.reduce_scatter(s.send.data(), s.recv.data(), c.count, c.dtype, c.op);
      return;
    }
    default: return;
  }
}

std::string finish_dense(Context& ctx, Slot& s, const Call& c, bool check) {
  if (s.request.valid()) s.request.wait();
  s.request = Request();
  if (s.registered) {
    ctx.comm.deregister_buffer(s.send.data());
    s.registered = false;
  }
  const std::size_t bytes = c.count * dtype_size(c.dtype);
  const auto world = static_cast<std::size_t>(ctx.world);
  std::string what;
  switch (c.kind) {
    case Kind::allreduce: {
      const std::vector<std::byte>& got = c.in_place ? s.send : s.recv;
      ctx.fold(got.data(), bytes);
      if (!check) return std::string();
      perf::reference(workload_of(ctx, c, c.count), c.op, &s.want);
      const std::size_t n = perf::count_wrong(got, s.want, c.dtype, &what);
      if (n != 0) return wrong(c, std::to_string(n) + " wrong elements, first " + what);
      return std::string();
    }
    case Kind::broadcast: {
      ctx.fold(s.send.data(), bytes);
      if (!check) return std::string();
      perf::generate(workload_of(ctx, c, c.count), c.root, &s.want);
      what = compare_bytes(s.send.data(), s.want.data(), bytes, c.dtype);
      return what.empty() ? what : wrong(c, what);
    }
    case Kind::allgather: {
      ctx.fold(s.recv.data(), bytes * world);
      if (!check) return std::string();
      for (int r = 0; r < ctx.world; ++r) {
        perf::generate(workload_of(ctx, c, c.count), r, &s.want);
        what = compare_bytes(s.recv.data() + bytes * static_cast<std::size_t>(r), s.want.data(), bytes, c.dtype);
        if (!what.empty()) return wrong(c, "rank " + std::to_string(r) + "'s part: " + what);
      }
      return std::string();
    }
    case Kind::reduce_scatter: {
      // Each rank holds another piece: not folded into the hash, checked against its slice.
      if (!check) return std::string();
      perf::reference(workload_of(ctx, c, c.count * world), c.op, &s.want);
      const auto* first = s.want.data() + bytes * static_cast<std::size_t>(ctx.rank);
      s.scratch.assign(first, first + bytes);
      const std::size_t n = perf::count_wrong(s.recv, s.scratch, c.dtype, &what);
      if (n != 0) return wrong(c, std::to_string(n) + " wrong elements, first " + what);
      return std::string();
    }
    default: return std::string();
  }
}

}  // namespace sparcoll::soak
