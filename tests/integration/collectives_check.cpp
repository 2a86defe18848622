// sparcoll-check-collectives: run under sparcoll-run; every rank runs a matrix of broadcast
// (every root), allgather (out of place and in place), reduce_scatter (every op), reduce (every
// op), gather and scatter (out of place and in place; their roots take turns), all_to_all (even
// and uneven pieces, all_to_all_v), allreduce_coalesced (every op) and allgather_coalesced (a
// tensor cut into four buffers, one empty) and barrier cases
// on seeded data (perf/lib/workload.hpp) and checks each result against what it must be. The
// root's buffers of reduce, gather and scatter are null on the other ranks, as they may be.
// Cases are issued with the non-blocking calls, --inflight of them at once and of mixed kinds,
// so several collectives share the collective thread's queue.
//
//   sparcoll-check-collectives [--kinds broadcast,allgather,reduce_scatter,reduce,gather,scatter,all_to_all,
//                                       allreduce_coalesced,allgather_coalesced,barrier]
//                              [--dtypes f32,f16,bf16,i32] [--ops sum,avg,min,max]
//                              [--sizes 0,1,255,257,1283] [--large N] [--inflight N] [--seed S]
//
// Broadcast and allgather move bytes: the result must equal the expected bytes exactly, so it is
// bitwise identical on every rank. reduce_scatter is compared element by element with
// perf::reference() (the generator's values make every order of addition exact), and every
// rank's hash of its piece is gathered and checked against the reference's bytes on every rank. --large adds one case per kind and dtype of about N elements in all (allgather and
// reduce_scatter: N / size per rank). barrier: ranks arrive at staggered times; no rank may
// leave before the last one arrived (CLOCK_MONOTONIC is one clock for every process on a host).
// Prints "sparcoll-check-collectives: N cases passed" on rank 0; exits 1 on the first wrong one.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "sparcoll/sparcoll.hpp"
#include "workload.hpp"

namespace {

using sparcoll::DataType;
using sparcoll::ReduceOp;

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) parts.push_back(part);
  return parts;
}

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr, "sparcoll-check-collectives: %s\n", why.c_str());
  std::exit(2);
}

enum class Kind { broadcast, allgather, reduce_scatter, reduce, gather, scatter, all_to_all, allreduce_coalesced,
                  allgather_coalesced };

struct Case {
  Kind kind = Kind::broadcast;
  DataType dtype = DataType::f32;
  ReduceOp op = ReduceOp::sum;
  std::size_t count = 0;  // broadcast, reduce: elements; allgather, reduce_scatter, gather, scatter: per rank
  int root = 0;
  bool in_place = false;  // all_to_all: uneven pieces instead
  std::uint64_t seed = 0;
  std::vector<std::byte> send, recv;
  // Coalesced: `count` elements cut into pieces (one of them empty), each in its own buffer.
  std::vector<std::size_t> piece_counts;
  std::vector<std::vector<std::byte>> piece_send, piece_recv;
  sparcoll::Request request;
  std::string label;
};

sparcoll::perf::WorkloadSpec spec_of(const Case& c, std::size_t count, int world) {
  sparcoll::perf::WorkloadSpec spec;
  spec.count = count;
  spec.dtype = c.dtype;
  spec.density = 0.5;  // zero blocks among non-zero ones: min and max must count a rank's zeros
  spec.block_elems = 256;
  spec.pattern = sparcoll::perf::Pattern::random;
  spec.seed = c.seed;
  spec.world_size = world;
  return spec;
}

// all_to_all: elements rank `from` sends to rank `to` (uneven: they differ per pair, some 0).
std::size_t piece(const Case& c, int from, int to) {
  if (!c.in_place) return c.count;
  return c.count == 0 ? 0 : c.count + static_cast<std::size_t>((from * 3 + to * 5) % 4) - 1;
}

// all_to_all: rank `from`'s whole send buffer, its pieces for ranks 0..n-1 back to back.
std::vector<std::byte> all_to_all_input(const Case& c, int from, int n) {
  std::size_t total = 0;
  for (int to = 0; to < n; ++to) total += piece(c, from, to);
  std::vector<std::byte> out;
  sparcoll::perf::generate(spec_of(c, total, n), from, &out);
  return out;
}

// Coalesced: count elements as 1, 0, half the rest and the rest (so odd tails, an empty buffer).
std::vector<std::size_t> coalesced_counts(std::size_t count) {
  const std::size_t a = std::min<std::size_t>(count, 1), b = (count - a) / 2;
  return {a, 0, b, count - a - b};
}

void start_coalesced(sparcoll::Communicator& comm, Case& c) {
  const int n = comm.size(), r = comm.rank();
  const std::size_t esize = sparcoll::dtype_size(c.dtype);
  sparcoll::perf::generate(spec_of(c, c.count, n), r, &c.send);
  c.piece_counts = coalesced_counts(c.count);
  const std::size_t pieces = c.piece_counts.size();
  c.piece_send.assign(pieces, {});
  c.piece_recv.assign(pieces, {});
  std::vector<const void*> send(pieces);
  std::vector<void*> recv(pieces);
  std::size_t at = 0;
  for (std::size_t i = 0; i < pieces; ++i) {
    const std::size_t bytes = c.piece_counts[i] * esize;
    c.piece_send[i].assign(c.send.begin() + static_cast<std::ptrdiff_t>(at),
                           c.send.begin() + static_cast<std::ptrdiff_t>(at + bytes));
    at += bytes;
    const std::size_t out = c.kind == Kind::allgather_coalesced ? bytes * static_cast<std::size_t>(n) : bytes;
    if (!c.in_place || c.kind == Kind::allgather_coalesced) c.piece_recv[i].assign(out, std::byte{0x7b});
    send[i] = c.piece_send[i].data();
    recv[i] = c.in_place && c.kind == Kind::allreduce_coalesced ? c.piece_send[i].data() : c.piece_recv[i].data();
  }
  // The send buffers are packed by the call: poison them at once, so a late read is caught.
  if (c.kind == Kind::allreduce_coalesced) {
    c.request = comm.iallreduce_coalesced(send.data(), recv.data(), c.piece_counts.data(), pieces, c.dtype, c.op);
    if (c.in_place) return;
  } else {
    c.request = comm.iallgather_coalesced(send.data(), recv.data(), c.piece_counts.data(), pieces, c.dtype);
  }
  for (auto& piece : c.piece_send) std::fill(piece.begin(), piece.end(), std::byte{0x5d});
}

// Fills the buffers and starts the case.
void start(sparcoll::Communicator& comm, Case& c) {
  const int n = comm.size(), r = comm.rank();
  const std::size_t esize = sparcoll::dtype_size(c.dtype);
  switch (c.kind) {
    case Kind::allreduce_coalesced:
    case Kind::allgather_coalesced:
      start_coalesced(comm, c);
      return;
    case Kind::broadcast:
      // Non-roots start from poison, so bytes the library forgets to write are caught.
      if (r == c.root) sparcoll::perf::generate(spec_of(c, c.count, n), r, &c.recv);
      else c.recv.assign(c.count * esize, std::byte{0x7b});
      c.request = comm.ibroadcast(c.recv.data(), c.count, c.dtype, c.root);
      return;
    case Kind::allgather: {
      sparcoll::perf::generate(spec_of(c, c.count, n), r, &c.send);
      c.recv.assign(c.count * esize * static_cast<std::size_t>(n), std::byte{0x7b});
      const void* send = c.send.data();
      if (c.in_place) {
        std::byte* mine = c.recv.data() + static_cast<std::size_t>(r) * c.count * esize;
        if (!c.send.empty()) std::memcpy(mine, c.send.data(), c.send.size());
        send = mine;
      }
      c.request = comm.iallgather(send, c.recv.data(), c.count, c.dtype);
      return;
    }
    case Kind::reduce_scatter:
      sparcoll::perf::generate(spec_of(c, c.count * static_cast<std::size_t>(n), n), r, &c.send);
      c.recv.assign(c.count * esize, std::byte{0x7b});
      c.request = comm.ireduce_scatter(c.send.data(), c.recv.data(), c.count, c.dtype, c.op);
      return;
    case Kind::reduce: {
      sparcoll::perf::generate(spec_of(c, c.count, n), r, &c.send);
      if (r != c.root) {
        c.request = comm.ireduce(c.send.data(), nullptr, c.count, c.dtype, c.op, c.root);
        return;
      }
      if (c.in_place) c.recv = c.send;
      else c.recv.assign(c.count * esize, std::byte{0x7b});
      c.request = comm.ireduce(c.in_place ? c.recv.data() : c.send.data(), c.recv.data(), c.count, c.dtype, c.op, c.root);
      return;
    }
    case Kind::gather: {
      sparcoll::perf::generate(spec_of(c, c.count, n), r, &c.send);
      if (r != c.root) {
        c.request = comm.igather(c.send.data(), nullptr, c.count, c.dtype, c.root);
        return;
      }
      c.recv.assign(c.count * esize * static_cast<std::size_t>(n), std::byte{0x7b});
      const void* send = c.send.data();
      if (c.in_place) {
        std::byte* mine = c.recv.data() + static_cast<std::size_t>(r) * c.count * esize;
        if (!c.send.empty()) std::memcpy(mine, c.send.data(), c.send.size());
        send = mine;
      }
      c.request = comm.igather(send, c.recv.data(), c.count, c.dtype, c.root);
      return;
    }
    case Kind::all_to_all: {
      c.send = all_to_all_input(c, r, n);
      std::vector<std::size_t> sb(static_cast<std::size_t>(n)), so(sb.size()), rb(sb.size()), ro(sb.size());
      std::size_t sat = 0, rat = 0;
      for (int p = 0; p < n; ++p) {
        sb[p] = piece(c, r, p) * esize, so[p] = sat, sat += sb[p];
        rb[p] = piece(c, p, r) * esize, ro[p] = rat, rat += rb[p];
      }
      c.recv.assign(rat, std::byte{0x7b});
      c.request = c.in_place ? comm.iall_to_all_v(c.send.data(), sb.data(), so.data(), c.recv.data(), rb.data(), ro.data())
                             : comm.iall_to_all(c.send.data(), c.recv.data(), c.count * esize);
      return;
    }
    case Kind::scatter: {
      if (r != c.root) {
        c.recv.assign(c.count * esize, std::byte{0x7b});
        c.request = comm.iscatter(nullptr, c.recv.data(), c.count, c.dtype, c.root);
        return;
      }
      sparcoll::perf::generate(spec_of(c, c.count * static_cast<std::size_t>(n), n), r, &c.send);
      void* recv = c.send.data() + static_cast<std::size_t>(r) * c.count * esize;
      if (!c.in_place) {
        c.recv.assign(c.count * esize, std::byte{0x7b});
        recv = c.recv.data();
      }
      c.request = comm.iscatter(c.send.data(), recv, c.count, c.dtype, c.root);
      return;
    }
  }
}

std::uint32_t fnv1a(const std::byte* data, std::size_t bytes) {
  std::uint32_t h = 2166136261u;
  for (std::size_t i = 0; i < bytes; ++i) h = (h ^ static_cast<std::uint8_t>(data[i])) * 16777619u;
  return h;
}

// Empty when the case's result is right, else what is wrong.
std::string verify(const sparcoll::Communicator& comm, const Case& c) {
  const int n = comm.size(), r = comm.rank();
  const std::size_t esize = sparcoll::dtype_size(c.dtype);
  std::vector<std::byte> want;
  std::vector<std::byte> got = c.recv;
  switch (c.kind) {
    case Kind::broadcast:
      sparcoll::perf::generate(spec_of(c, c.count, n), c.root, &want);
      break;
    case Kind::allreduce_coalesced: {
      // The pieces back to back are the allreduce of the whole tensor.
      got.clear();
      for (std::size_t i = 0; i < c.piece_counts.size(); ++i) {
        const auto& piece = c.in_place ? c.piece_send[i] : c.piece_recv[i];
        got.insert(got.end(), piece.begin(), piece.end());
      }
      sparcoll::perf::reference(spec_of(c, c.count, n), c.op, &want);
      std::string where;
      if (got.size() != want.size())
        return "result has " + std::to_string(got.size()) + " bytes, want " + std::to_string(want.size());
      if (const std::size_t wrong = sparcoll::perf::count_wrong(got, want, c.dtype, &where); wrong != 0)
        return std::to_string(wrong) + " wrong elements, first " + where;
      break;  // and the bytes too
    }
    case Kind::allgather_coalesced: {
      // Piece i's buffer holds every rank's piece i, in rank order.
      std::vector<std::vector<std::byte>> inputs(static_cast<std::size_t>(n));
      for (int p = 0; p < n; ++p) sparcoll::perf::generate(spec_of(c, c.count, n), p, &inputs[static_cast<std::size_t>(p)]);
      got.clear();
      std::size_t at = 0;
      for (std::size_t i = 0; i < c.piece_counts.size(); ++i) {
        const std::size_t bytes = c.piece_counts[i] * esize;
        for (int p = 0; p < n; ++p) {
          const auto& in = inputs[static_cast<std::size_t>(p)];
          want.insert(want.end(), in.begin() + static_cast<std::ptrdiff_t>(at),
                      in.begin() + static_cast<std::ptrdiff_t>(at + bytes));
        }
        got.insert(got.end(), c.piece_recv[i].begin(), c.piece_recv[i].end());
        at += bytes;
      }
      break;
    }
    case Kind::allgather: {
      std::vector<std::byte> part;
      for (int p = 0; p < n; ++p) {
        sparcoll::perf::generate(spec_of(c, c.count, n), p, &part);
        want.insert(want.end(), part.begin(), part.end());
      }
      break;
    }
    case Kind::reduce_scatter: {
      std::vector<std::byte> full;
      sparcoll::perf::reference(spec_of(c, c.count * static_cast<std::size_t>(n), n), c.op, &full);
      const std::size_t at = static_cast<std::size_t>(r) * c.count * esize;
      want.assign(full.begin() + static_cast<std::ptrdiff_t>(at),
                  full.begin() + static_cast<std::ptrdiff_t>(at + c.count * esize));
      std::string where;
      const std::size_t wrong = sparcoll::perf::count_wrong(c.recv, want, c.dtype, &where);
      if (c.recv.size() != want.size())
        return "result has " + std::to_string(c.recv.size()) + " bytes, want " + std::to_string(want.size());
      if (wrong != 0) return std::to_string(wrong) + " wrong elements, first " + where;
      return std::string();
    }
    case Kind::reduce: {
      if (r != c.root) return std::string();  // nothing to see: its recvbuf was null
      sparcoll::perf::reference(spec_of(c, c.count, n), c.op, &want);
      std::string where;
      if (c.recv.size() != want.size())
        return "result has " + std::to_string(c.recv.size()) + " bytes, want " + std::to_string(want.size());
      if (const std::size_t wrong = sparcoll::perf::count_wrong(c.recv, want, c.dtype, &where); wrong != 0)
        return std::to_string(wrong) + " wrong elements, first " + where;
      break;  // and the bytes too (the generator's values make every order exact; no -0 results)
    }
    case Kind::gather: {
      if (r != c.root) return std::string();
      std::vector<std::byte> part;
      for (int p = 0; p < n; ++p) {
        sparcoll::perf::generate(spec_of(c, c.count, n), p, &part);
        want.insert(want.end(), part.begin(), part.end());
      }
      break;
    }
    case Kind::all_to_all:
      for (int p = 0; p < n; ++p) {
        const std::vector<std::byte> theirs = all_to_all_input(c, p, n);
        std::size_t at = 0;
        for (int q = 0; q < r; ++q) at += piece(c, p, q) * esize;
        want.insert(want.end(), theirs.begin() + static_cast<std::ptrdiff_t>(at),
                    theirs.begin() + static_cast<std::ptrdiff_t>(at + piece(c, p, r) * esize));
      }
      break;
    case Kind::scatter: {
      std::vector<std::byte> full;
      sparcoll::perf::generate(spec_of(c, c.count * static_cast<std::size_t>(n), n), c.root, &full);
      const std::size_t at = static_cast<std::size_t>(r) * c.count * esize;
      want.assign(full.begin() + static_cast<std::ptrdiff_t>(at),
                  full.begin() + static_cast<std::ptrdiff_t>(at + c.count * esize));
      if (r == c.root && c.in_place) {
        // The root's piece stays where it is, and the rest of its sendbuf is untouched.
        return c.send == full ? std::string() : std::string("the root's sendbuf changed in an in-place scatter");
      }
      break;
    }
  }
  if (got.size() != want.size())
    return "result has " + std::to_string(got.size()) + " bytes, want " + std::to_string(want.size());
  for (std::size_t i = 0; i < want.size(); ++i)
    if (got[i] != want[i]) {
      char text[96];
      std::snprintf(text, sizeof text, "byte %zu (element %zu) differs: got 0x%02x, want 0x%02x", i, i / esize,
                    static_cast<unsigned>(got[i]), static_cast<unsigned>(want[i]));
      return text;
    }
  return std::string();
}

std::int64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// One barrier round: rank `late` arrives 30 ms after the others; nobody may leave before it came.
std::string barrier_round(sparcoll::Communicator& comm, int late) {
  if (comm.rank() == late) std::this_thread::sleep_for(std::chrono::milliseconds(30));
  const std::int64_t arrived = monotonic_ns();
  comm.barrier();
  const std::int64_t left = monotonic_ns();
  std::vector<std::int64_t> arrivals(static_cast<std::size_t>(comm.size()));
  // int64 travels as two i32 elements: allgather moves bytes.
  comm.allgather(&arrived, arrivals.data(), 2, DataType::i32);
  for (int p = 0; p < comm.size(); ++p)
    if (arrivals[static_cast<std::size_t>(p)] > left)
      return "rank " + std::to_string(comm.rank()) + " left the barrier " +
             std::to_string((arrivals[static_cast<std::size_t>(p)] - left) / 1000) + " us before rank " +
             std::to_string(p) + " arrived (late rank " + std::to_string(late) + ")";
  return std::string();
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> kinds = {"broadcast",  "allgather",           "reduce_scatter",      "reduce",
                                    "gather",     "scatter",             "all_to_all",          "allreduce_coalesced",
                                    "allgather_coalesced", "barrier"},
                           dtypes = {"f32", "f16", "bf16", "i32"}, ops = {"sum", "avg", "min", "max"},
                           sizes = {"0", "1", "255", "257", "1283"};
  std::size_t large = 0;
  int inflight = 4;
  std::uint64_t seed = 11;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage("missing value after " + a);
    const std::string v = argv[++i];
    if (a == "--kinds") kinds = split(v);
    else if (a == "--dtypes") dtypes = split(v);
    else if (a == "--ops") ops = split(v);
    else if (a == "--sizes") sizes = split(v);
    else if (a == "--large") large = std::strtoull(v.c_str(), nullptr, 10);
    else if (a == "--inflight") inflight = std::atoi(v.c_str());
    else if (a == "--seed") seed = std::strtoull(v.c_str(), nullptr, 10);
    else usage("unknown flag " + a);
  }
  if (inflight < 1) usage("--inflight must be >= 1");
  auto has = [&](const char* k) {
    for (const auto& x : kinds)
      if (x == k) return true;
    return false;
  };
  for (const auto& k : kinds)
    if (k != "broadcast" && k != "allgather" && k != "reduce_scatter" && k != "reduce" && k != "gather" &&
        k != "scatter" && k != "all_to_all" && k != "allreduce_coalesced" && k != "allgather_coalesced" &&
        k != "barrier")
      usage("unknown kind " + k);

  try {
    sparcoll::Communicator comm = sparcoll::Communicator::from_env();
    const int n = comm.size();
    std::vector<Case> cases;
    auto add = [&](Case c, const std::string& what) {
      c.seed = seed + cases.size();
      c.label = what;
      cases.push_back(std::move(c));
    };
    std::vector<std::size_t> counts;
    for (const auto& s : sizes) counts.push_back(std::strtoull(s.c_str(), nullptr, 10));
    for (const auto& dt : dtypes) {
      const auto dtype = sparcoll::parse_dtype(dt);
      if (!dtype) usage("bad dtype " + dt);
      for (std::size_t count : counts) {
        const std::string tail = " " + dt + " count=" + std::to_string(count);
        if (has("broadcast"))
          for (int root = 0; root < n; ++root)
            add(Case{Kind::broadcast, *dtype, ReduceOp::sum, count, root}, "broadcast root=" + std::to_string(root) + tail);
        if (has("allgather"))
          for (bool in_place : {false, true}) {
            Case c{Kind::allgather, *dtype, ReduceOp::sum, count};
            c.in_place = in_place;
            add(std::move(c), "allgather" + tail + (in_place ? " in-place" : " out-of-place"));
          }
        if (has("reduce_scatter"))
          for (const auto& o : ops) {
            const auto op = sparcoll::parse_reduce_op(o);
            if (!op) usage("bad op " + o);
            add(Case{Kind::reduce_scatter, *dtype, *op, count}, "reduce_scatter " + o + tail);
          }
        // Rooted: the root takes turns (every root over the cases, not every case at every root).
        auto rooted = [&](Kind kind, ReduceOp op, bool in_place, const std::string& what) {
          Case c{kind, *dtype, op, count, static_cast<int>(cases.size() % static_cast<std::size_t>(n))};
          c.in_place = in_place;
          const std::string root = " root=" + std::to_string(c.root);
          add(std::move(c), what + root + tail + (in_place ? " in-place" : " out-of-place"));
        };
        if (has("reduce"))
          for (const auto& o : ops) {
            const auto op = sparcoll::parse_reduce_op(o);
            if (!op) usage("bad op " + o);
            rooted(Kind::reduce, *op, cases.size() % 2 == 1, "reduce " + o);
          }
        if (has("allreduce_coalesced"))
          for (const auto& o : ops) {
            const auto op = sparcoll::parse_reduce_op(o);
            if (!op) usage("bad op " + o);
            Case c{Kind::allreduce_coalesced, *dtype, *op, count};
            c.in_place = cases.size() % 2 == 1;
            const bool in_place = c.in_place;
            add(std::move(c), "allreduce_coalesced " + o + tail + (in_place ? " in-place" : " out-of-place"));
          }
        if (has("allgather_coalesced"))
          add(Case{Kind::allgather_coalesced, *dtype, ReduceOp::sum, count}, "allgather_coalesced" + tail);
        for (bool in_place : {false, true}) {
          if (has("gather")) rooted(Kind::gather, ReduceOp::sum, in_place, "gather");
          if (has("scatter")) rooted(Kind::scatter, ReduceOp::sum, in_place, "scatter");
          if (has("all_to_all")) {
            Case c{Kind::all_to_all, *dtype, ReduceOp::sum, count};
            c.in_place = in_place;
            add(std::move(c), "all_to_all" + tail + (in_place ? " uneven" : " even"));
          }
        }
      }
      if (large > 0) {
        const std::string tail = " " + dt + " large";
        if (has("broadcast")) add(Case{Kind::broadcast, *dtype, ReduceOp::sum, large, n - 1}, "broadcast root=last" + tail);
        const std::size_t per_rank = large / static_cast<std::size_t>(n) + 1;  // +1: an odd size
        if (has("allgather")) add(Case{Kind::allgather, *dtype, ReduceOp::sum, per_rank}, "allgather" + tail);
        if (has("reduce_scatter"))
          add(Case{Kind::reduce_scatter, *dtype, ReduceOp::sum, per_rank}, "reduce_scatter sum" + tail);
        if (has("reduce")) add(Case{Kind::reduce, *dtype, ReduceOp::sum, large, n - 1}, "reduce sum root=last" + tail);
        if (has("gather")) add(Case{Kind::gather, *dtype, ReduceOp::sum, per_rank, n / 2}, "gather root=middle" + tail);
        if (has("scatter")) add(Case{Kind::scatter, *dtype, ReduceOp::sum, per_rank, 0}, "scatter root=0" + tail);
        if (has("all_to_all")) add(Case{Kind::all_to_all, *dtype, ReduceOp::sum, per_rank}, "all_to_all" + tail);
        if (has("allreduce_coalesced"))
          add(Case{Kind::allreduce_coalesced, *dtype, ReduceOp::sum, large}, "allreduce_coalesced sum" + tail);
        if (has("allgather_coalesced"))
          add(Case{Kind::allgather_coalesced, *dtype, ReduceOp::sum, per_rank}, "allgather_coalesced" + tail);
      }
    }

    std::size_t passed = 0;
    for (std::size_t first = 0; first < cases.size(); first += static_cast<std::size_t>(inflight)) {
      const std::size_t last = std::min(cases.size(), first + static_cast<std::size_t>(inflight));
      for (std::size_t i = first; i < last; ++i) start(comm, cases[i]);
      for (std::size_t i = first; i < last; ++i) {
        Case& c = cases[i];
        c.request.wait();
        const std::string wrong = verify(comm, c);
        if (!wrong.empty()) {
          std::fprintf(stderr, "sparcoll-check-collectives: rank %d: %s: %s\n", comm.rank(), c.label.c_str(),
                       wrong.c_str());
          return 1;
        }
        if (c.kind == Kind::reduce_scatter) {
          // Every rank checks every rank's piece: the gathered hashes against the reference's.
          const std::uint32_t h = fnv1a(c.recv.data(), c.recv.size());
          std::vector<std::uint32_t> all(static_cast<std::size_t>(n));
          comm.allgather(&h, all.data(), 1, DataType::i32);
          std::vector<std::byte> full;
          sparcoll::perf::reference(spec_of(c, c.count * static_cast<std::size_t>(n), n), c.op, &full);
          const std::size_t bytes = c.count * sparcoll::dtype_size(c.dtype);
          for (int p = 0; p < n; ++p)
            if (all[static_cast<std::size_t>(p)] != fnv1a(full.data() + static_cast<std::size_t>(p) * bytes, bytes)) {
              // Bytes, not values: no input is -0, so no exact result may be -0 either.
              std::fprintf(stderr,
                           "sparcoll-check-collectives: rank %d: %s: rank %d's piece differs from the reference "
                           "(bytes, not values)\n",
                           comm.rank(), c.label.c_str(), p);
              return 1;
            }
        }
        ++passed;
        // Freed, not only emptied: `= {}` would assign an empty list and keep the capacity,
        // so every case's buffers would stay allocated (2x its tensor per case).
        c.send = std::vector<std::byte>();
        c.recv = std::vector<std::byte>();
        c.piece_send = std::vector<std::vector<std::byte>>();
        c.piece_recv = std::vector<std::vector<std::byte>>();
      }
    }
    if (has("barrier")) {
      for (int late = 0; late < n; ++late) {
        const std::string wrong = barrier_round(comm, late);
        if (!wrong.empty()) {
          std::fprintf(stderr, "sparcoll-check-collectives: barrier: %s\n", wrong.c_str());
          return 1;
        }
        ++passed;
      }
    }
    if (comm.rank() == 0)
      std::printf("sparcoll-check-collectives: %zu cases passed on %d ranks over %s\n", passed, n,
                  comm.transport_name().c_str());
    return 0;
  } catch (const sparcoll::Error& e) {
    std::fprintf(stderr, "sparcoll-check-collectives: %s\n", e.what());
    return 1;
  }
}
