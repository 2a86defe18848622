// The Gloo peer: Gloo's allreduce over its TCP transport on the same data, with the same sweep
// flags, timing, checks and columns as sparcoll-perf (perf/lib/bench.hpp). Launched as N
// processes, by sparcoll-run (or mpirun); they meet through a gloo::rendezvous::FileStore in a
// directory named after the job:
//   sparcoll-run -n 4 -- sparcoll-perf-gloo --algo halving_doubling -b 4K -e 100M -f 16 -d 0,0.01,1
// Algorithms (Gloo's own): ring (AllreduceRing: n-1 rounds passing whole buffers),
// ring_chunked (AllreduceRingChunked: reduce-scatter + allgather), halving_doubling
// (AllreduceHalvingDoubling). f32/i32, sum/min/max. Bytes per rank are each algorithm's model,
// marked "model" (Gloo keeps no byte counters).
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier_all_to_all.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "bench.hpp"
#include "report.hpp"
#include "sweep.hpp"

namespace {

constexpr int kMaxRanks = 1024;  // as sparcoll-run

struct Flags {
  std::vector<std::string> algos = {"ring"};
  std::string hostname = "127.0.0.1";
  std::string store_dir;
  int rank = -1, size = -1;
  int timeout_s = 120;
  sparcoll::perf::SweepOptions sweep;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "sparcoll-perf-gloo: %s\n"
               "usage: sparcoll-run -n N -- sparcoll-perf-gloo [flags]\n"
               "  --algo LIST           ring, ring_chunked, halving_doubling (default ring)\n"
               "  --hostname ADDR       address of Gloo's TCP transport (default 127.0.0.1)\n"
               "  --store-dir DIR       rendezvous directory (default /tmp/sparcoll-perf-gloo-<job>)\n"
               "  --rank R --size N     when not started by sparcoll-run or mpirun\n"
               "  --timeout S           Gloo's timeout for connecting and for each operation (default 120)\n"
               "%s"
               "  (dtypes f32 and i32 only; ops sum, min and max only)\n",
               why.c_str(), sparcoll::perf::sweep_usage().c_str());
  std::exit(2);
}

int env_int(const char* name) {
  const char* v = std::getenv(name);
  std::uint64_t n = 0;
  if (v == nullptr || !sparcoll::perf::parse_u64(v, &n) || n > INT_MAX) return -1;
  return static_cast<int>(n);
}

Flags parse(int argc, char** argv) {
  Flags f;
  f.sweep.blocks = {256};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    std::string error;
    switch (sparcoll::perf::parse_sweep_flag(argc, argv, &i, &f.sweep, &error)) {
      case sparcoll::perf::FlagResult::ok: continue;
      case sparcoll::perf::FlagResult::error: usage(error);
      case sparcoll::perf::FlagResult::not_mine: break;
    }
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage("missing value after " + a);
      return argv[++i];
    };
    std::uint64_t n = 0;
    if (a == "--algo") {
      f.algos = sparcoll::perf::split_list(value());
      for (const std::string& algo : f.algos)
        if (algo != "ring" && algo != "ring_chunked" && algo != "halving_doubling")
          usage("unknown --algo '" + algo + "' (ring, ring_chunked, halving_doubling)");
    } else if (a == "--hostname") f.hostname = value();
    else if (a == "--store-dir") f.store_dir = value();
    else if (a == "--rank") {
      if (!sparcoll::perf::parse_u64(value(), &n) || n > INT_MAX) usage("--rank takes a non-negative integer");
      f.rank = static_cast<int>(n);
    } else if (a == "--size") {
      if (!sparcoll::perf::parse_u64(value(), &n) || n == 0 || n > INT_MAX) usage("--size takes a positive integer");
      f.size = static_cast<int>(n);
    } else if (a == "--timeout") {
      if (!sparcoll::perf::parse_u64(value(), &n) || n == 0 || n > 86400) usage("--timeout takes seconds in [1, 86400]");
      f.timeout_s = static_cast<int>(n);
    } else if (a == "-h" || a == "--help") {
      std::printf("usage: sparcoll-run -n N -- sparcoll-perf-gloo [flags]\n%s", sparcoll::perf::sweep_usage().c_str());
      std::exit(0);
    } else {
      usage("unknown flag " + a);
    }
  }
  std::string error;
  if (!sparcoll::perf::finish_sweep(&f.sweep, &error)) usage(error);
  for (const std::string& dt : f.sweep.dtypes)
    if (dt != "f32" && dt != "i32") usage("--dtype " + dt + ": Gloo reduces f32 and i32 only here");
  if (f.sweep.op == "avg") usage("--op avg: Gloo has no average; use sum");
  // Gloo's algorithms keep the byte count in an int.
  for (std::uint64_t b : f.sweep.sizes_bytes)
    if (b > static_cast<std::uint64_t>(INT_MAX)) usage("sizes of 2 GiB and more do not fit Gloo's int byte counts");
  if (f.sweep.elements * 4 > static_cast<std::uint64_t>(INT_MAX)) usage("--elements: 2 GiB and more do not fit Gloo's int byte counts");

  // Rank and world size: flags, else sparcoll-run's, mpirun's or torchrun's variables.
  if (f.rank < 0) f.rank = env_int("SPARCOLL_RANK");
  if (f.rank < 0) f.rank = env_int("OMPI_COMM_WORLD_RANK");
  if (f.rank < 0) f.rank = env_int("RANK");
  if (f.size < 0) f.size = env_int("SPARCOLL_WORLD_SIZE");
  if (f.size < 0) f.size = env_int("OMPI_COMM_WORLD_SIZE");
  if (f.size < 0) f.size = env_int("WORLD_SIZE");
  if (f.rank < 0 || f.size < 1)
    usage("cannot tell the rank and the world size: start it with sparcoll-run -n N (or mpirun), or pass --rank and --size");
  if (f.size > kMaxRanks) usage("world size " + std::to_string(f.size) + " is more ranks than allowed (at most 1024)");
  if (f.rank >= f.size) usage("rank " + std::to_string(f.rank) + " is not below the world size " + std::to_string(f.size));
  if (f.store_dir.empty()) {
    std::string job;
    if (const char* token = std::getenv("SPARCOLL_JOB_TOKEN"); token != nullptr && *token) job = token;
    else if (const char* ns = std::getenv("PMIX_NAMESPACE"); ns != nullptr && *ns) job = ns;
    else job = "ppid" + std::to_string(getppid());
    f.store_dir = "/tmp/sparcoll-perf-gloo-" + job;
  }
  return f;
}

// A barrier through the file store, not the sockets: once every rank has passed it, no rank
// reads from its connections any more, so the first one to close them cannot fail a peer that
// is still waiting for the last message of a socket barrier ("Connection closed by peer").
void store_barrier(gloo::rendezvous::Store& store, const std::string& name, int rank, int size, int timeout_s) {
  store.set(name + "." + std::to_string(rank), std::vector<char>{'1'});
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back(name + "." + std::to_string(r));
  store.wait(keys, std::chrono::seconds(timeout_s));
}

class GlooCollective final : public sparcoll::perf::Collective {
 public:
  GlooCollective(std::shared_ptr<gloo::Context> context, std::string algo)
      : context_(std::move(context)), algo_(std::move(algo)), barrier_(std::make_unique<gloo::BarrierAllToAll>(context_)) {}
  int rank() const override { return context_->rank; }
  int size() const override { return context_->size; }
  void barrier() override { barrier_->run(); }
  void prepare(void* buffer, std::size_t count, sparcoll::DataType dtype, sparcoll::ReduceOp op) override {
    bound_.clear();
    dtype_ = dtype;
    op_ = op;
    if (count > 0) bind(buffer, count);
  }
  void allreduce(const void* send, void* recv, std::size_t count, sparcoll::DataType, sparcoll::ReduceOp) override {
    if (send != recv) throw std::logic_error("the gloo peer runs in place");
    if (count == 0) return;
    // A gloo algorithm is bound to one buffer: one per (buffer, count), made on first use (in the
    // warm-up), as PyTorch's gloo backend makes one per call. Bucketed trace steps use several.
    for (const Bound& b : bound_)
      if (b.buffer == recv && b.count == count) return b.algorithm->run();
    bind(recv, count);
    bound_.back().algorithm->run();
  }
  void max_f64(double* v, std::size_t n) override {
    gloo::AllreduceRing<double>(context_, {v}, static_cast<int>(n), gloo::ReductionFunction<double>::max).run();
  }
  void sum_u64(std::uint64_t* v, std::size_t n) override {
    gloo::AllreduceRing<std::uint64_t>(context_, {v}, static_cast<int>(n), gloo::ReductionFunction<std::uint64_t>::sum)
        .run();
  }
  void model_traffic(std::uint64_t bytes, double* sent, double* received) const override {
    const double n = context_->size, s = static_cast<double>(bytes);
    // ring passes the whole buffer n-1 times; the others reduce-scatter then allgather.
    *sent = *received = algo_ == "ring" ? (n - 1) * s : 2.0 * (n - 1) / n * s;
  }

 private:
  template <typename T>
  std::unique_ptr<gloo::Algorithm> make(void* buffer, std::size_t count, sparcoll::ReduceOp op) {
    const gloo::ReductionFunction<T>* fn = op == sparcoll::ReduceOp::min   ? gloo::ReductionFunction<T>::min
                                           : op == sparcoll::ReduceOp::max ? gloo::ReductionFunction<T>::max
                                                                           : gloo::ReductionFunction<T>::sum;
    std::vector<T*> ptrs = {static_cast<T*>(buffer)};
    const int n = static_cast<int>(count);
    if (algo_ == "ring_chunked") return std::make_unique<gloo::AllreduceRingChunked<T>>(context_, ptrs, n, fn);
    if (algo_ == "halving_doubling") return std::make_unique<gloo::AllreduceHalvingDoubling<T>>(context_, ptrs, n, fn);
    return std::make_unique<gloo::AllreduceRing<T>>(context_, ptrs, n, fn);
  }

  std::shared_ptr<gloo::Context> context_;
  std::string algo_;
  // Held by pointer: Gloo's algorithms have noexcept(false) destructors.
  std::unique_ptr<gloo::BarrierAllToAll> barrier_;
  void bind(void* buffer, std::size_t count) {
    Bound b{buffer, count, nullptr};
    if (dtype_ == sparcoll::DataType::f32) b.algorithm = make<float>(buffer, count, op_);
    else b.algorithm = make<std::int32_t>(buffer, count, op_);
    bound_.push_back(std::move(b));
  }
  struct Bound {
    void* buffer;
    std::size_t count;
    std::unique_ptr<gloo::Algorithm> algorithm;
  };
  std::vector<Bound> bound_;
  sparcoll::DataType dtype_ = sparcoll::DataType::f32;
  sparcoll::ReduceOp op_ = sparcoll::ReduceOp::sum;
};

}  // namespace

int main(int argc, char** argv) {
  const Flags flags = parse(argc, argv);
  try {
    std::error_code ec;
    std::filesystem::create_directories(flags.store_dir, ec);
    if (ec) throw std::runtime_error("cannot create the rendezvous directory " + flags.store_dir + ": " + ec.message());
    gloo::transport::tcp::attr attr;
    attr.hostname = flags.hostname;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore store(flags.store_dir);

    std::string options;
    for (int i = 1; i < argc; ++i) options += std::string(i > 1 ? " " : "") + argv[i];
    std::uint64_t wrong = 0;
    for (const std::string& algo : flags.algos) {
      // One context per algorithm, each under its own key prefix of the same store.
      gloo::rendezvous::PrefixStore prefixed(algo, store);
      auto context = std::make_shared<gloo::rendezvous::Context>(flags.rank, flags.size);
      context->setTimeout(std::chrono::seconds(flags.timeout_s));
      context->connectFullMesh(prefixed, device);
      GlooCollective gloo_collective(context, algo);

      sparcoll::perf::SweepRun run;
      run.identity.system = "gloo";
      run.identity.algo = algo;
      run.identity.transport = "tcp";
      run.identity.bytes_source = "model";
      run.header.tool = "sparcoll-perf-gloo";
      run.header.transport = "tcp (gloo, " + flags.hostname + ")";
      run.header.ranks = flags.size;
      run.header.options = options + " | algo " + algo;
      run.default_block = 256;
      run.program = "sparcoll-perf-gloo";
      wrong += sparcoll::perf::run_sweep(gloo_collective, flags.sweep, run);
      store_barrier(prefixed, "done", flags.rank, flags.size, flags.timeout_s);
    }
    // Rank 0 removes the directory once every rank is past its last wait on the store.
    if (flags.rank == 0) {
      store_barrier(store, "left", flags.rank, flags.size, flags.timeout_s);
      std::filesystem::remove_all(flags.store_dir, ec);
    } else {
      store.set("left." + std::to_string(flags.rank), std::vector<char>{'1'});
    }
    return wrong == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sparcoll-perf-gloo: rank %d: %s\n", flags.rank, e.what());
    if (flags.rank == 0) {
      std::error_code ec;
      std::filesystem::remove_all(flags.store_dir, ec);
    }
    return 1;
  }
}
