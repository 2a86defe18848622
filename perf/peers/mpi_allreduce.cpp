// The Open MPI peer: MPI_Allreduce on the same data, with the same sweep flags, timing, checks
// and columns as sparcoll-perf (perf/lib/bench.hpp).
//   mpirun --allow-run-as-root --oversubscribe -np 2 --mca btl self,vader sparcoll-perf-mpi
//          -b 4K -e 100M -f 16 -d 0,0.01,1 --transport shm --json out.jsonl
// Only f32/i32 and sum/min/max (MPI has no fp16/bf16 reduction of its own, and no average).
// --transport only labels the rows (shm for the vader BTL, tcp for the tcp BTL): the BTL is
// chosen on mpirun's command line. Bytes per rank are the dense ring's model, 2(n-1)/n x size
// each way, marked "model".
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench.hpp"
#include "report.hpp"
#include "sweep.hpp"

namespace {

struct Flags {
  std::string label = "default", transport = "mpi";
  sparcoll::perf::SweepOptions sweep;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "sparcoll-perf-mpi: %s\n"
               "usage: mpirun -np N [--mca btl ...] sparcoll-perf-mpi [flags]\n"
               "  --transport NAME      label of the rows: shm (btl vader) or tcp (btl tcp); default mpi\n"
               "  --label NAME          the algo column (default: default)\n"
               "%s"
               "  (dtypes f32 and i32 only; ops sum, min and max only)\n",
               why.c_str(), sparcoll::perf::sweep_usage().c_str());
  std::exit(2);
}

// Parsed before MPI_Init, so that bad flags end every rank with a message and exit code 2
// instead of an MPI_Abort banner.
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
    if (a == "--label") f.label = value();
    else if (a == "--transport") f.transport = value();
    else if (a == "-h" || a == "--help") {
      std::printf("usage: mpirun -np N sparcoll-perf-mpi [flags]\n%s", sparcoll::perf::sweep_usage().c_str());
      std::exit(0);
    } else usage("unknown flag " + a);
  }
  std::string error;
  if (!sparcoll::perf::finish_sweep(&f.sweep, &error)) usage(error);
  for (const std::string& dt : f.sweep.dtypes)
    if (dt != "f32" && dt != "i32") usage("--dtype " + dt + ": MPI reduces f32 and i32 only here");
  if (f.sweep.op == "avg") usage("--op avg: MPI has no average; use sum");
  for (const std::string& p : f.sweep.patterns)
    if (sparcoll::perf::is_trace_pattern(p) && f.sweep.op != "sum") usage("trace patterns need --op sum here");
  for (std::uint64_t b : f.sweep.sizes_bytes)
    if (b / 4 > 0x7fffffffu) usage("sizes above 2^31 elements do not fit MPI_Allreduce's int count");
  if (f.sweep.elements > 0x7fffffffu) usage("--elements above 2^31 does not fit MPI_Allreduce's int count");
  return f;
}

class MpiCollective final : public sparcoll::perf::Collective {
 public:
  MpiCollective() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void barrier() override { MPI_Barrier(MPI_COMM_WORLD); }
  void allreduce(const void* send, void* recv, std::size_t count, sparcoll::DataType dtype, sparcoll::ReduceOp op) override {
    const MPI_Datatype mdt = dtype == sparcoll::DataType::f32 ? MPI_FLOAT : MPI_INT;
    const MPI_Op mop = op == sparcoll::ReduceOp::min ? MPI_MIN : (op == sparcoll::ReduceOp::max ? MPI_MAX : MPI_SUM);
    MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, static_cast<int>(count), mdt, mop, MPI_COMM_WORLD);
  }
  void max_f64(double* v, std::size_t n) override {
    MPI_Allreduce(MPI_IN_PLACE, v, static_cast<int>(n), MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  }
  void sum_u64(std::uint64_t* v, std::size_t n) override {
    MPI_Allreduce(MPI_IN_PLACE, v, static_cast<int>(n), MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  }
  void model_traffic(std::uint64_t bytes, double* sent, double* received) const override {
    *sent = *received = 2.0 * (size_ - 1) / size_ * static_cast<double>(bytes);
  }

 private:
  int rank_ = 0, size_ = 1;
};

}  // namespace

int main(int argc, char** argv) {
  const Flags flags = parse(argc, argv);
  MPI_Init(&argc, &argv);
  int status = 0;
  try {
    MpiCollective mpi;
    sparcoll::perf::SweepRun run;
    run.identity.system = "mpi";
    run.identity.algo = flags.label;
    run.identity.transport = flags.transport;
    run.identity.bytes_source = "model";
    run.header.tool = "sparcoll-perf-mpi";
    run.header.transport = flags.transport;
    run.header.ranks = mpi.size();
    std::string options;
    for (int i = 1; i < argc; ++i) options += std::string(i > 1 ? " " : "") + argv[i];
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int length = 0;
    MPI_Get_library_version(version, &length);
    std::string lib(version, static_cast<std::size_t>(length));
    if (const auto nl = lib.find_first_of("\n,"); nl != std::string::npos) lib.resize(nl);
    run.header.options = options + " | " + lib;
    run.default_block = 256;
    run.program = "sparcoll-perf-mpi";
    status = sparcoll::perf::run_sweep(mpi, flags.sweep, run) == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sparcoll-perf-mpi: %s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return status;
}
