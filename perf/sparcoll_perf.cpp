// sparcoll-perf: one collective configuration, timed and checked; run it under sparcoll-run:
//   sparcoll-run -n 4 -- sparcoll-perf --elements 26214400 --density 0.01 --check
// Rank 0 prints one nccl-tests-style row (and appends it as JSON with --json FILE).
// Times are per iteration, the slowest rank's, after a barrier; median and p99 are reported.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "report.hpp"
#include "sparcoll/sparcoll.hpp"
#include "workload.hpp"

namespace {

struct Flags {
  std::string transport, algo;
  std::uint64_t elements = 1 << 20;
  std::string dtype = "f32", op = "sum", pattern = "random";
  double density = 0.01;
  std::uint32_t block = 0;  // 0: the communicator's (SPARCOLL_BLOCK_ELEMS)
  int iters = 20, warmup = 3;
  bool check = false, out_of_place = false, header = true, register_send = false;
  std::uint64_t seed = 1;
  std::string json;
};

void usage(const char* why) {
  std::fprintf(stderr,
               "sparcoll-perf: %s\n"
               "usage: sparcoll-perf [--elements N] [--dtype f32|f16|bf16|i32] [--op sum|avg|min|max]\n"
               "                     [--density D] [--pattern random|overlap|disjoint|one_dense] [--block N]\n"
               "                     [--transport shm|tcp|...] [--algo block_sparse] [--iters N] [--warmup N]\n"
               "                     [--check] [--out-of-place] [--register] [--seed N] [--json FILE] [--no-header]\n"
               "  --register: register the send buffer for zero-copy sends (Communicator::register_buffer)\n",
               why);
  std::exit(2);
}

bool parse_u64(const char* text, std::uint64_t* out) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || text[0] == '-') return false;
  *out = v;
  return true;
}

Flags parse(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage(("missing value after " + a).c_str());
      return argv[++i];
    };
    std::uint64_t n = 0;
    if (a == "--transport") f.transport = value();
    else if (a == "--algo") f.algo = value();
    else if (a == "--elements") { if (!parse_u64(value(), &f.elements)) usage("--elements takes a non-negative integer"); }
    else if (a == "--dtype") f.dtype = value();
    else if (a == "--op") f.op = value();
    else if (a == "--pattern") f.pattern = value();
    else if (a == "--density") {
      char* end = nullptr;
      const char* v = value();
      f.density = std::strtod(v, &end);
      if (end == v || *end != '\0' || !(f.density >= 0.0 && f.density <= 1.0)) usage("--density takes a number in [0, 1]");
    } else if (a == "--block") {
      if (!parse_u64(value(), &n) || n == 0 || n > (1u << 20)) usage("--block takes an integer in [1, 1048576]");
      f.block = static_cast<std::uint32_t>(n);
    } else if (a == "--iters") {
      if (!parse_u64(value(), &n) || n == 0 || n > 1000000) usage("--iters takes an integer in [1, 1000000]");
      f.iters = static_cast<int>(n);
    } else if (a == "--warmup") {
      if (!parse_u64(value(), &n) || n > 1000000) usage("--warmup takes an integer in [0, 1000000]");
      f.warmup = static_cast<int>(n);
    } else if (a == "--seed") { if (!parse_u64(value(), &f.seed)) usage("--seed takes a non-negative integer"); }
    else if (a == "--json") f.json = value();
    else if (a == "--check") f.check = true;
    else if (a == "--out-of-place") f.out_of_place = true;
    else if (a == "--register") f.register_send = true;
    else if (a == "--no-header") f.header = false;
    else usage(("unknown flag " + a).c_str());
  }
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  const Flags flags = parse(argc, argv);
  const auto dtype = sparcoll::parse_dtype(flags.dtype);
  const auto op = sparcoll::parse_reduce_op(flags.op);
  sparcoll::perf::Pattern pattern;
  if (!dtype) usage(("unknown dtype " + flags.dtype).c_str());
  if (!op) usage(("unknown op " + flags.op).c_str());
  if (!sparcoll::perf::parse_pattern(flags.pattern, &pattern)) usage(("unknown pattern " + flags.pattern).c_str());

  try {
    sparcoll::Options options = sparcoll::Options::from_env();
    if (!flags.transport.empty()) options.transport = flags.transport;
    if (!flags.algo.empty()) options.algo = flags.algo;
    if (flags.block != 0) options.block_elems = flags.block;
    sparcoll::Communicator comm(options);
    const int rank = comm.rank();

    sparcoll::perf::WorkloadSpec spec;
    spec.count = flags.elements;
    spec.dtype = *dtype;
    spec.density = flags.density;
    spec.block_elems = comm.options().block_elems;
    spec.pattern = pattern;
    spec.seed = flags.seed;
    spec.world_size = comm.size();
    std::vector<std::byte> pristine, work, out;
    sparcoll::perf::generate(spec, rank, &pristine);
    work = pristine;
    if (flags.out_of_place) out.resize(pristine.size());
    void* recv = flags.out_of_place ? out.data() : work.data();
    if (flags.register_send && !work.empty()) comm.register_buffer(work.data(), work.size());

    std::vector<float> times(static_cast<std::size_t>(flags.iters), 0.0f);
    double wire_bytes = 0;
    for (int it = -flags.warmup; it < flags.iters; ++it) {
      if (!flags.out_of_place) std::memcpy(work.data(), pristine.data(), pristine.size());
      comm.barrier();
      const sparcoll::TrafficStats before = comm.traffic();
      const auto t0 = std::chrono::steady_clock::now();
      comm.allreduce(work.data(), recv, spec.count, spec.dtype, *op);
      const auto t1 = std::chrono::steady_clock::now();
      const sparcoll::TrafficStats after = comm.traffic();
      if (it < 0) continue;
      times[static_cast<std::size_t>(it)] = std::chrono::duration<float, std::micro>(t1 - t0).count();
      wire_bytes += static_cast<double>((after.bytes_sent - before.bytes_sent) + (after.bytes_received - before.bytes_received));
    }
    // The slowest rank defines each iteration's time.
    comm.allreduce(times.data(), times.data(), times.size(), sparcoll::DataType::f32, sparcoll::ReduceOp::max);
    const double wire_avg = wire_bytes / flags.iters;  // rank 0's own traffic

    std::uint64_t wrong = 0;
    if (flags.check) {
      std::vector<std::byte> want;
      sparcoll::perf::reference(spec, *op, &want);
      const std::vector<std::byte>& got = flags.out_of_place ? out : work;
      std::string first;
      wrong = sparcoll::perf::count_wrong(got, want, spec.dtype, &first);
      if (wrong) std::fprintf(stderr, "sparcoll-perf: rank %d: %llu wrong elements, first %s\n", rank,
                              static_cast<unsigned long long>(wrong), first.c_str());
    }
    std::int32_t wrong_total = static_cast<std::int32_t>(std::min<std::uint64_t>(wrong, 1u << 30));
    comm.allreduce(&wrong_total, &wrong_total, 1, sparcoll::DataType::i32, sparcoll::ReduceOp::sum);

    if (rank == 0) {
      sparcoll::perf::ResultRow row;
      row.system = "sparcoll";
      row.algo = comm.options().algo;
      row.transport = comm.transport_name();
      row.ranks = comm.size();
      row.elements = spec.count;
      row.dtype = flags.dtype;
      row.op = flags.op;
      row.density = spec.density;
      row.pattern = flags.pattern;
      row.block = spec.block_elems;
      row.iters = flags.iters;
      row.wire_bytes_per_rank = wire_avg;
      row.wrong = static_cast<std::uint64_t>(wrong_total);
      std::vector<double> t(times.begin(), times.end());
      sparcoll::perf::summarize(t, spec.count * sparcoll::dtype_size(spec.dtype), &row);
      if (flags.header) std::printf("%s\n", sparcoll::perf::table_header().c_str());
      std::printf("%s\n", sparcoll::perf::table_row(row).c_str());
      std::string error;
      if (!flags.json.empty() && !sparcoll::perf::append_json(flags.json, row, &error)) {
        std::fprintf(stderr, "sparcoll-perf: %s\n", error.c_str());
        return 1;
      }
    }
    return wrong_total == 0 ? 0 : 1;
  } catch (const sparcoll::Error& e) {
    std::fprintf(stderr, "sparcoll-perf: %s\n", e.what());
    return 1;
  }
}
