// sparcoll-check: run under sparcoll-run; every rank runs a matrix of allreduce cases on seeded
// data and checks each result element by element against perf::reference(). Several cases are
// kept in flight at once (--inflight), alternating in-place and out-of-place buffers.
//
//   sparcoll-check [--dtypes f32,f16,bf16,i32] [--ops sum,avg,min,max] [--sizes 0,1,255,257]
//                  [--densities 0,0.001,0.01,0.1,1] [--patterns random,overlap,disjoint,one_dense]
//                  [--inflight N] [--repeat N] [--seed S] [--negative-zeros]
//                  [--register] [--deny-registration] [--traffic] [--algo NAME]
// Every result is also hashed and the hashes compared across ranks: results must be bitwise
// identical everywhere. --negative-zeros writes -0.0 into the zero elements of odd ranks' float
// inputs (they still count as zero). --register registers every send buffer for zero-copy
// (Communicator::register_buffer) before its op and deregisters it after, and checks the
// registration API's errors; --deny-registration then makes every registration fail as a low
// `ulimit -l` would (drops CAP_IPC_LOCK, memlock limit 0), so sends must fall back to copying.
// --traffic: rank 0 finally prints the packet counters summed over the ranks
// ("traffic (all ranks): packets_sent=… retransmitted=… dropped_invalid=… duplicates=… ").
// --algo runs every case with that algorithm (ring, butterfly, auto, ...; default: the options').
// Prints "sparcoll-check: N cases passed" on rank 0; exits 1 on the first wrong element.
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "sparcoll/sparcoll.hpp"
#include "workload.hpp"

namespace {

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) parts.push_back(part);
  return parts;
}

struct Case {
  sparcoll::perf::WorkloadSpec spec;
  sparcoll::ReduceOp op;
  bool in_place;
  std::vector<std::byte> send, recv;
  sparcoll::Request request;
  std::string label;
};

std::int32_t fnv1a(const std::vector<std::byte>& bytes) {
  std::uint32_t h = 2166136261u;
  for (std::byte b : bytes) h = (h ^ static_cast<std::uint8_t>(b)) * 16777619u;
  return static_cast<std::int32_t>(h);
}

// -0.0 in every zero element of a float tensor.
void negate_zeros(std::vector<std::byte>* data, sparcoll::DataType dtype) {
  if (dtype == sparcoll::DataType::i32) return;
  const std::size_t esize = sparcoll::dtype_size(dtype);
  for (std::size_t at = 0; at + esize <= data->size(); at += esize) {
    bool zero = true;
    for (std::size_t k = 0; k < esize; ++k) zero &= (*data)[at + k] == std::byte{0};
    if (zero) (*data)[at + esize - 1] = std::byte{0x80};  // little-endian: the sign is in the last byte
  }
}

// What a low `ulimit -l` does to an unprivileged process: no more memory can be pinned. In two
// steps. Before the communicator exists, this process gives up CAP_IPC_LOCK (which lets root
// pin past the limit) with an unlimited limit for setup, which pins the transport's rings:
// capabilities belong to a thread, so only now do all of sparcoll's threads inherit the change,
// and the rdma device refuses commands from a thread whose credentials changed after it was
// opened (dropping it later in the main thread alone made that thread's sends fail with EACCES
// once collectives ran there). After setup the limit (one per process) drops to 0.
void give_up_ipc_lock() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (syscall(SYS_capget, &header, data) != 0) std::perror("capget");
  const unsigned bit = CAP_IPC_LOCK % 32, word = CAP_IPC_LOCK / 32;
  data[word].effective &= ~(1u << bit);
  data[word].permitted &= ~(1u << bit);
  if (syscall(SYS_capset, &header, data) != 0) std::perror("capset");
  const struct rlimit unlimited{RLIM_INFINITY, RLIM_INFINITY};
  if (setrlimit(RLIMIT_MEMLOCK, &unlimited) != 0) std::perror("setrlimit(RLIMIT_MEMLOCK, unlimited)");
}

void deny_memory_registration() {
  const struct rlimit none{0, 0};
  if (setrlimit(RLIMIT_MEMLOCK, &none) != 0) std::perror("setrlimit(RLIMIT_MEMLOCK)");
}

// The registration API rejects what it must.
bool registration_errors_reported(sparcoll::Communicator& comm) {
  std::vector<std::byte> a(4096), b(4096);
  int reported = 0;
  auto expect_error = [&](auto&& call) {
    try {
      call();
    } catch (const sparcoll::Error&) {
      ++reported;
    }
  };
  expect_error([&] { comm.register_buffer(nullptr, 16); });
  expect_error([&] { comm.register_buffer(a.data(), 0); });
  expect_error([&] { comm.deregister_buffer(b.data()); });  // never registered
  comm.register_buffer(a.data(), a.size());
  expect_error([&] { comm.register_buffer(a.data() + 100, 100); });  // overlaps
  comm.deregister_buffer(a.data());
  expect_error([&] { comm.deregister_buffer(a.data()); });  // twice
  return reported == 5;
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "sparcoll-check: %s\n", why);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> dtypes = {"f32", "f16", "bf16", "i32"}, ops = {"sum", "avg", "min", "max"},
                           sizes = {"0", "1", "255", "257"}, densities = {"0", "0.001", "0.01", "0.1", "1"},
                           patterns = {"random", "overlap", "disjoint"};
  int inflight = 3, repeat = 1;
  sparcoll::Algorithm algo = sparcoll::Algorithm::from_options;
  std::uint64_t seed = 7;
  bool negative_zeros = false, register_buffers = false, deny_registration = false, traffic = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--negative-zeros" || a == "--register" || a == "--deny-registration" || a == "--traffic") {
      (a == "--negative-zeros"  ? negative_zeros
       : a == "--register"      ? register_buffers
       : a == "--traffic"       ? traffic
                                : deny_registration) = true;
      continue;
    }
    if (i + 1 >= argc) usage(("missing value after " + a).c_str());
    const std::string v = argv[++i];
    if (a == "--dtypes") dtypes = split(v);
    else if (a == "--ops") ops = split(v);
    else if (a == "--sizes") sizes = split(v);
    else if (a == "--densities") densities = split(v);
    else if (a == "--patterns") patterns = split(v);
    else if (a == "--inflight") inflight = std::atoi(v.c_str());
    else if (a == "--repeat") repeat = std::atoi(v.c_str());
    else if (a == "--algo") {
      auto parsed = sparcoll::parse_algorithm(v);
      if (!parsed) usage(("unknown algorithm " + v).c_str());
      algo = *parsed;
    } else if (a == "--seed") seed = std::strtoull(v.c_str(), nullptr, 10);
    else usage(("unknown flag " + a).c_str());
  }
  if (inflight < 1) usage("--inflight must be >= 1");

  try {
    if (deny_registration) give_up_ipc_lock();
    sparcoll::Communicator comm = sparcoll::Communicator::from_env();
    if (deny_registration) deny_memory_registration();
    if (register_buffers && !registration_errors_reported(comm)) {
      std::fprintf(stderr, "sparcoll-check: rank %d: a bad register_buffer/deregister_buffer call was accepted\n",
                   comm.rank());
      return 1;
    }
    std::vector<Case> cases;
    for (int rep = 0; rep < repeat; ++rep)
      for (const auto& dt : dtypes)
        for (const auto& op : ops)
          for (const auto& size : sizes)
            for (const auto& density : densities)
              for (const auto& pattern : patterns) {
                Case c;
                auto parsed_dt = sparcoll::parse_dtype(dt);
                auto parsed_op = sparcoll::parse_reduce_op(op);
                if (!parsed_dt || !parsed_op) usage(("bad dtype or op: " + dt + " " + op).c_str());
                if (!sparcoll::perf::parse_pattern(pattern, &c.spec.pattern)) usage(("bad pattern " + pattern).c_str());
                c.spec.dtype = *parsed_dt;
                c.op = *parsed_op;
                c.spec.count = std::strtoull(size.c_str(), nullptr, 10);
                c.spec.density = std::atof(density.c_str());
                c.spec.block_elems = comm.options().block_elems;
                c.spec.world_size = comm.size();
                c.spec.seed = seed + cases.size();
                c.in_place = cases.size() % 2 == 1;
                c.label = dt + " " + op + " count=" + size + " density=" + density + " " + pattern +
                          (c.in_place ? " in-place" : " out-of-place");
                cases.push_back(std::move(c));
              }

    std::size_t passed = 0;
    for (std::size_t first = 0; first < cases.size(); first += static_cast<std::size_t>(inflight)) {
      const std::size_t last = std::min(cases.size(), first + static_cast<std::size_t>(inflight));
      for (std::size_t i = first; i < last; ++i) {
        Case& c = cases[i];
        sparcoll::perf::generate(c.spec, comm.rank(), &c.send);
        if (negative_zeros && comm.rank() % 2 == 1) negate_zeros(&c.send, c.spec.dtype);
        // Poison the output so a block the library forgets to write is caught.
        c.recv.assign(c.send.size(), std::byte{0x7b});
        void* out = c.in_place ? c.send.data() : c.recv.data();
        if (register_buffers && !c.send.empty()) comm.register_buffer(c.send.data(), c.send.size());
        c.request = comm.iallreduce(c.send.data(), out, c.spec.count, c.spec.dtype, c.op, algo);
      }
      for (std::size_t i = first; i < last; ++i) {
        Case& c = cases[i];
        c.request.wait();
        if (register_buffers && !c.send.empty()) comm.deregister_buffer(c.send.data());
        std::vector<std::byte> want;
        sparcoll::perf::reference(c.spec, c.op, &want);
        std::string where;
        const std::vector<std::byte>& got = c.in_place ? c.send : c.recv;
        const std::size_t wrong = sparcoll::perf::count_wrong(got, want, c.spec.dtype, &where);
        if (wrong != 0) {
          std::fprintf(stderr, "sparcoll-check: rank %d: %s: %zu wrong elements, first %s\n", comm.rank(),
                       c.label.c_str(), wrong, where.c_str());
          return 1;
        }
        // Bitwise identical on every rank: the largest hash and the smallest (max of ~h = ~min h)
        // must agree; one allreduce gives both.
        const std::int32_t h = fnv1a(got);
        std::int32_t hashes[2] = {h, ~h};
        comm.allreduce(hashes, hashes, 2, sparcoll::DataType::i32, sparcoll::ReduceOp::max);
        if (hashes[0] != ~hashes[1]) {
          std::fprintf(stderr, "sparcoll-check: rank %d: %s: results differ between ranks (bytes, not values)\n",
                       comm.rank(), c.label.c_str());
          return 1;
        }
        ++passed;
        // Freed, not only emptied: `= {}` would assign an empty list and keep the capacity,
        // so every case's buffers would stay allocated (2x its tensor per case).
        c.send = std::vector<std::byte>();
        c.recv = std::vector<std::byte>();
      }
    }
    if (traffic) {
      // The progress threads refresh the packet counters every few milliseconds.
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      const sparcoll::TrafficStats t = comm.traffic();
      std::int32_t counts[4] = {static_cast<std::int32_t>(t.packets_sent), static_cast<std::int32_t>(t.packets_retransmitted),
                                static_cast<std::int32_t>(t.packets_dropped_invalid),
                                static_cast<std::int32_t>(t.packets_duplicate)};
      comm.allreduce(counts, counts, 4, sparcoll::DataType::i32, sparcoll::ReduceOp::sum);
      if (comm.rank() == 0) {
        std::printf("traffic (all ranks): packets_sent=%d retransmitted=%d dropped_invalid=%d duplicates=%d \n", counts[0],
                    counts[1], counts[2], counts[3]);
        // The same counters as the transport names them, rank 0's own.
        std::printf("transport counters (rank 0):");
        for (const sparcoll::TransportCounter& c : comm.transport_counters())
          std::printf(" %s=%llu", c.name.c_str(), static_cast<unsigned long long>(c.value));
        std::printf(" \n");
      }
    }
    if (comm.rank() == 0)
      std::printf("sparcoll-check: %zu cases passed on %d ranks over %s\n", passed, comm.size(),
                  comm.transport_name().c_str());
    return 0;
  } catch (const sparcoll::Error& e) {
    std::fprintf(stderr, "sparcoll-check: %s\n", e.what());
    return 1;
  }
}
