// sparcoll-perf: block-sparse allreduce timed and checked over a sweep; run it under sparcoll-run:
//   sparcoll-run -n 4 -- sparcoll-perf --elements 26214400 --density 0.01
//   sparcoll-run -n 2 --transport tcp -- sparcoll-perf -b 4K -e 100M -f 16 -d 0,0.01,1 --json out.jsonl
// Rank 0 prints a header (host, commit, options) and one nccl-tests-style row per point, and
// appends them to --json / --csv files. Several --transport / --block values run one
// communicator each, one after the other (co-located aggregation only: dedicated aggregator
// processes serve a single communicator); several --algo values share it, each running the whole
// sweep in turn, or with --call-by-call taking turns call by call at every point (the fair way to
// compare algorithms on a host whose speed drifts). See perf/lib/sweep.hpp for the sweep flags.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "bench.hpp"
#include "report.hpp"
#include "sparcoll/sparcoll.hpp"
#include "sweep.hpp"

extern char** environ;

namespace {

struct Flags {
  std::vector<std::string> transports, algos;
  bool out_of_place = false, register_send = false, read_floor = false, call_by_call = false;
  sparcoll::perf::SweepOptions sweep;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "sparcoll-perf: %s\n"
               "usage: sparcoll-run -n N [--aggregators M] [--transport T] -- sparcoll-perf [flags]\n"
               "  --transport LIST      shm,tcp,... (default: the communicator's choice)\n"
               "  --algo LIST           block_sparse, auto, ring, butterfly, ssar_recursive_doubling,\n"
               "                        ssar_split_allgather, dsar_split_allgather, recursive_doubling, direct,\n"
               "                        hybrid, block_recursive_doubling (default: SPARCOLL_ALGO, itself auto)\n"
               "  --call-by-call        with several --algo: at every point they take turns, one call each\n"
               "                        (in an order drawn anew), instead of each running the whole sweep in turn\n"
               "  --out-of-place        separate receive buffer   --register: register the send buffer (zero-copy)\n"
               "  --read-floor          time each rank reading its tensor once instead (all ranks at once):\n"
               "                        the floor under any allreduce that must look at every element (system 'floor')\n"
               "  --version             print the commit and whether gradient traces are supported\n"
               "%s",
               why.c_str(), sparcoll::perf::sweep_usage().c_str());
  std::exit(2);
}

Flags parse(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::string error;
    switch (sparcoll::perf::parse_sweep_flag(argc, argv, &i, &f.sweep, &error)) {
      case sparcoll::perf::FlagResult::ok: continue;
      case sparcoll::perf::FlagResult::error: usage(error);
      case sparcoll::perf::FlagResult::not_mine: break;
    }
    std::string inline_value;
    bool has_inline = false;
    if (const auto eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) {
      inline_value = a.substr(eq + 1);
      a = a.substr(0, eq);
      has_inline = true;
    }
    auto value = [&]() -> std::string {
      if (has_inline) return inline_value;
      if (i + 1 >= argc) usage("missing value after " + a);
      return argv[++i];
    };
    auto list = [&](std::vector<std::string>* out) {
      *out = sparcoll::perf::split_list(value());
      for (const std::string& s : *out)
        if (s.empty()) usage(a + " has an empty item");
    };
    if (a == "--transport") list(&f.transports);
    else if (a == "--algo") list(&f.algos);
    else if (a == "--out-of-place") f.out_of_place = true;
    else if (a == "--call-by-call") f.call_by_call = true;
    else if (a == "--register") f.register_send = true;
    else if (a == "--read-floor") f.read_floor = true;
    else if (a == "--version") {
      std::printf("sparcoll-perf %s (gradient traces: %s)\n", sparcoll::perf::build_commit(),
                  sparcoll::perf::trace_supported() ? "yes" : "no");
      std::exit(0);
    } else if (a == "-h" || a == "--help") {
      std::printf("usage: sparcoll-run -n N [--aggregators M] [--transport T] -- sparcoll-perf [flags]\n%s",
                  sparcoll::perf::sweep_usage().c_str());
      std::exit(0);
    } else {
      usage("unknown flag " + a);
    }
  }
  std::string error;
  if (!sparcoll::perf::finish_sweep(&f.sweep, &error)) usage(error);
  if (f.read_floor && (f.register_send || !f.algos.empty()))
    usage("--read-floor times a read of the tensor, no allreduce: it takes no --algo or --register");
  if (f.register_send && f.out_of_place) usage("--register applies to in-place runs (the registered buffer is the one sent)");
  if (f.call_by_call && f.read_floor) usage("--call-by-call takes turns between algorithms: --read-floor runs none");
  if (f.call_by_call && f.register_send && f.algos.size() > 1)
    usage("--call-by-call with --register: the algorithms would each register the one buffer they share; "
          "measure a registered buffer with one --algo");
  return f;
}

// The sweep's untimed helpers, on the communicator. The library reduces f32: microseconds keep 7
// significant digits, plenty for timings.
void max_over_ranks(sparcoll::Communicator& comm, double* v, std::size_t n) {
  std::vector<float> f(v, v + n);
  comm.allreduce(f.data(), f.data(), n, sparcoll::DataType::f32, sparcoll::ReduceOp::max);
  for (std::size_t i = 0; i < n; ++i) v[i] = f[i];
}

// Exact through i32 sums: 21-bit pieces summed over at most 1024 ranks stay below 2^31.
void sum_over_ranks(sparcoll::Communicator& comm, std::uint64_t* v, std::size_t n) {
  std::vector<std::int32_t> parts(3 * n);
  for (std::size_t i = 0; i < n; ++i)
    for (int k = 0; k < 3; ++k) parts[3 * i + k] = static_cast<std::int32_t>((v[i] >> (21 * k)) & 0x1fffff);
  comm.allreduce(parts.data(), parts.data(), parts.size(), sparcoll::DataType::i32, sparcoll::ReduceOp::sum);
  for (std::size_t i = 0; i < n; ++i) {
    v[i] = 0;
    for (int k = 0; k < 3; ++k) v[i] += static_cast<std::uint64_t>(parts[3 * i + k]) << (21 * k);
  }
}

// The floor under any allreduce that must look at every element: each rank reads its whole
// tensor once (an OR over 64-bit words, which the compiler vectorizes; memory-bound at sizes
// where the floor matters), every rank at the same time after the sweep's barrier. The
// communicator is used only for the barrier and the untimed helpers.
class ReadFloor final : public sparcoll::perf::Collective {
 public:
  explicit ReadFloor(sparcoll::Communicator& comm) : comm_(comm) {}
  int rank() const override { return comm_.rank(); }
  int size() const override { return comm_.size(); }
  void barrier() override { comm_.barrier(); }
  void allreduce(const void* send, void*, std::size_t count, sparcoll::DataType dtype, sparcoll::ReduceOp) override {
    const std::size_t bytes = count * sparcoll::dtype_size(dtype);
    const auto* words = static_cast<const std::uint64_t*>(send);
    std::uint64_t any = 0;
    for (std::size_t i = 0; i < bytes / 8; ++i) any |= words[i];
    const auto* tail = static_cast<const unsigned char*>(send) + bytes / 8 * 8;
    for (std::size_t i = 0; i < bytes % 8; ++i) any |= tail[i];
    sink_ = any;  // volatile: the read is not optimized away
  }
  void max_f64(double* v, std::size_t n) override { max_over_ranks(comm_, v, n); }
  void sum_u64(std::uint64_t* v, std::size_t n) override { sum_over_ranks(comm_, v, n); }
  bool computes_allreduce() const override { return false; }

 private:
  sparcoll::Communicator& comm_;
  volatile std::uint64_t sink_ = 0;
};

class SparcollCollective final : public sparcoll::perf::Collective {
 public:
  SparcollCollective(sparcoll::Communicator& comm, bool register_send, sparcoll::Algorithm algo)
      : comm_(comm), register_(register_send), algo_(algo) {}
  ~SparcollCollective() override { release(); }
  int rank() const override { return comm_.rank(); }
  int size() const override { return comm_.size(); }
  void barrier() override { comm_.barrier(); }
  void prepare(void* buffer, std::size_t count, sparcoll::DataType dtype, sparcoll::ReduceOp) override {
    if (!register_) return;
    release();
    if (count == 0) return;
    registered_ = buffer;
    comm_.register_buffer(buffer, count * sparcoll::dtype_size(dtype));
  }
  void allreduce(const void* send, void* recv, std::size_t count, sparcoll::DataType dtype, sparcoll::ReduceOp op) override {
    // The blocking call, as a training loop makes it (it may run in this thread).
    ran_ = comm_.allreduce(send, recv, count, dtype, op, algo_).algorithm;
  }
  std::string ran_algorithm() const override {
    const bool automatic = algo_ == sparcoll::Algorithm::auto_select ||
                           (algo_ == sparcoll::Algorithm::from_options && comm_.options().algo == "auto");
    return automatic ? std::string(sparcoll::algorithm_name(ran_)) : std::string();
  }
  void max_f64(double* v, std::size_t n) override { max_over_ranks(comm_, v, n); }
  void sum_u64(std::uint64_t* v, std::size_t n) override { sum_over_ranks(comm_, v, n); }
  bool traffic(std::uint64_t* sent, std::uint64_t* received) override {
    const sparcoll::TrafficStats t = comm_.traffic();
    *sent = t.bytes_sent;
    *received = t.bytes_received;
    return true;
  }
  // Block-sparse reduces every element in rank order; the peer-to-peer algorithms in another
  // (fixed) order, so a trace's fp32 sums are checked within the reordering bound.
  bool rank_order() const override {
    return algo_ == sparcoll::Algorithm::block_sparse ||
           (algo_ == sparcoll::Algorithm::from_options && comm_.options().algo == "block_sparse");
  }

 private:
  void release() {
    if (registered_ != nullptr) comm_.deregister_buffer(registered_);
    registered_ = nullptr;
  }
  sparcoll::Communicator& comm_;
  bool register_;
  sparcoll::Algorithm algo_;
  sparcoll::Algorithm ran_ = sparcoll::Algorithm::from_options;
  void* registered_ = nullptr;
};

std::string describe_options(int argc, char** argv, const sparcoll::Options& o) {
  std::string s;
  for (int i = 1; i < argc; ++i) s += std::string(i > 1 ? " " : "") + argv[i];
  s += " | block " + std::to_string(o.block_elems) + " lanes " + std::to_string(o.lanes) + " fusion " +
       std::to_string(o.fusion) + " threads " + std::to_string(o.threads) + " inflight " +
       std::to_string(o.max_inflight) + " poll " + o.poll_mode;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    if (kv.rfind("SPARCOLL_", 0) != 0 || kv.rfind("SPARCOLL_JOB_TOKEN=", 0) == 0 || kv.rfind("SPARCOLL_RANK=", 0) == 0 ||
        kv.rfind("SPARCOLL_STORE", 0) == 0)
      continue;
    s += " " + kv;
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const Flags flags = parse(argc, argv);
  try {
    const sparcoll::Options base = sparcoll::Options::from_env();
    const std::vector<std::string> transports = flags.transports.empty() ? std::vector<std::string>{""} : flags.transports;
    const std::vector<std::string> algos = flags.algos.empty() ? std::vector<std::string>{""} : flags.algos;
    const std::vector<std::uint32_t> blocks =
        flags.sweep.blocks.empty() ? std::vector<std::uint32_t>{0} : flags.sweep.blocks;
    // One communicator per transport and block size; the algorithm is chosen per call.
    std::vector<sparcoll::Algorithm> parsed_algos;
    for (const std::string& algo : algos) {
      if (algo.empty()) {
        parsed_algos.push_back(sparcoll::Algorithm::from_options);
        continue;
      }
      const auto a = sparcoll::parse_algorithm(algo);
      if (!a) usage("unknown algorithm '" + algo + "' (--algo): block_sparse, auto, ring, butterfly, ssar_recursive_doubling, ssar_split_allgather, dsar_split_allgather, recursive_doubling, direct, hybrid, block_recursive_doubling");
      parsed_algos.push_back(*a);
    }
    const std::size_t communicators = transports.size() * blocks.size();
    if (base.aggregators > 0 && communicators > 1)
      usage("dedicated aggregators (SPARCOLL_AGGREGATORS=" + std::to_string(base.aggregators) +
            ") serve one communicator: give one --transport and --block per launch");

    std::uint64_t wrong = 0;
    for (const std::string& transport : transports) {
      for (std::uint32_t block : blocks) {
        sparcoll::Options options = base;
        if (!transport.empty()) options.transport = transport;
        if (block != 0) options.block_elems = block;
        sparcoll::Communicator comm(options);
        sparcoll::perf::SweepOptions sweep = flags.sweep;
        sweep.blocks = {comm.options().block_elems};
        if (flags.read_floor) {
          ReadFloor floor(comm);
          sparcoll::perf::SweepRun run;
          run.identity.system = "floor";
          run.identity.algo = "read";
          run.identity.transport = comm.transport_name();
          run.identity.bytes_source = "measured";
          run.header.tool = "sparcoll-perf --read-floor";
          run.header.transport = comm.transport_name();
          run.header.ranks = comm.size();
          run.header.options = describe_options(argc, argv, comm.options());
          run.default_block = comm.options().block_elems;
          run.program = "sparcoll-perf";
          sparcoll::perf::run_sweep(floor, sweep, run);
          continue;
        }
        auto describe = [&](sparcoll::Algorithm algo) {
          sparcoll::perf::SweepRun run;
          run.identity.system = "sparcoll";
          run.identity.algo = algo == sparcoll::Algorithm::from_options ? comm.options().algo
                                                                         : std::string(sparcoll::algorithm_name(algo));
          run.identity.transport = comm.transport_name();
          run.identity.aggregators = comm.options().aggregators;
          run.identity.bytes_source = "measured";
          run.header.tool = "sparcoll-perf";
          run.header.transport = comm.transport_name();
          run.header.ranks = comm.size();
          run.header.aggregators = comm.options().aggregators;
          run.header.options = describe_options(argc, argv, comm.options());
          run.default_block = comm.options().block_elems;
          run.out_of_place = flags.out_of_place;
          run.program = "sparcoll-perf";
          return run;
        };
        if (flags.call_by_call) {
          std::vector<std::unique_ptr<SparcollCollective>> owned;
          std::vector<sparcoll::perf::Collective*> collectives;
          std::vector<sparcoll::perf::SweepRun> runs;
          for (const sparcoll::Algorithm algo : parsed_algos) {
            owned.push_back(std::make_unique<SparcollCollective>(comm, flags.register_send, algo));
            collectives.push_back(owned.back().get());
            runs.push_back(describe(algo));
          }
          wrong += sparcoll::perf::run_sweep(collectives, sweep, runs);
          continue;
        }
        for (const sparcoll::Algorithm algo : parsed_algos) {
          SparcollCollective collective(comm, flags.register_send, algo);
          wrong += sparcoll::perf::run_sweep(collective, sweep, describe(algo));
        }
      }
    }
    return wrong == 0 ? 0 : 1;
  } catch (const sparcoll::Error& e) {
    std::fprintf(stderr, "sparcoll-perf: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sparcoll-perf: %s\n", e.what());
    return 1;
  }
}
