// The Open MPI peer: MPI_Allreduce on the same data, timing and columns as sparcoll-perf.
//   mpirun -np 2 sparcoll-perf-mpi --elements 26214400 --density 0.01 --check
// Only f32/i32 sum/min/max (MPI has no fp16/bf16 reduction of its own; avg is sum here).
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "report.hpp"
#include "workload.hpp"

namespace {
[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "sparcoll-perf-mpi: %s\nusage: sparcoll-perf-mpi [--elements N] [--dtype f32|i32] [--op sum|min|max]"
               " [--density D] [--pattern P] [--block N] [--iters N] [--warmup N] [--check] [--seed N] [--json FILE]"
               " [--no-header] [--label NAME]\n",
               why);
  MPI_Abort(MPI_COMM_WORLD, 2);
  std::exit(2);
}
}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  sparcoll::perf::WorkloadSpec spec;
  spec.count = 1 << 20;
  std::string dtype = "f32", op = "sum", pattern = "random", json, label = "default";
  int iters = 20, warmup = 3;
  bool check = false, header = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value after " + a).c_str());
      return argv[++i];
    };
    if (a == "--elements") spec.count = std::strtoull(value().c_str(), nullptr, 10);
    else if (a == "--dtype") dtype = value();
    else if (a == "--op") op = value();
    else if (a == "--density") spec.density = std::atof(value().c_str());
    else if (a == "--pattern") pattern = value();
    else if (a == "--block") spec.block_elems = static_cast<std::uint32_t>(std::atoi(value().c_str()));
    else if (a == "--iters") iters = std::atoi(value().c_str());
    else if (a == "--warmup") warmup = std::atoi(value().c_str());
    else if (a == "--seed") spec.seed = std::strtoull(value().c_str(), nullptr, 10);
    else if (a == "--json") json = value();
    else if (a == "--label") label = value();
    else if (a == "--check") check = true;
    else if (a == "--no-header") header = false;
    else usage(("unknown flag " + a).c_str());
  }
  if (iters < 1 || spec.block_elems == 0 || spec.density < 0 || spec.density > 1) usage("invalid numeric flag");
  auto dt = sparcoll::parse_dtype(dtype);
  auto rop = sparcoll::parse_reduce_op(op);
  if (!dt || (*dt != sparcoll::DataType::f32 && *dt != sparcoll::DataType::i32)) usage("--dtype must be f32 or i32");
  if (!rop || *rop == sparcoll::ReduceOp::avg) usage("--op must be sum, min or max");
  if (!sparcoll::perf::parse_pattern(pattern, &spec.pattern)) usage("unknown --pattern");
  spec.dtype = *dt;
  spec.world_size = size;
  const MPI_Datatype mdt = spec.dtype == sparcoll::DataType::f32 ? MPI_FLOAT : MPI_INT;
  const MPI_Op mop = *rop == sparcoll::ReduceOp::sum ? MPI_SUM : (*rop == sparcoll::ReduceOp::min ? MPI_MIN : MPI_MAX);

  std::vector<std::byte> pristine, work;
  sparcoll::perf::generate(spec, rank, &pristine);
  work = pristine;
  std::vector<double> times;
  for (int it = -warmup; it < iters; ++it) {
    std::memcpy(work.data(), pristine.data(), pristine.size());
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = std::chrono::steady_clock::now();
    MPI_Allreduce(MPI_IN_PLACE, work.data(), static_cast<int>(spec.count), mdt, mop, MPI_COMM_WORLD);
    const auto t1 = std::chrono::steady_clock::now();
    double us = std::chrono::duration<double, std::micro>(t1 - t0).count();
    MPI_Allreduce(MPI_IN_PLACE, &us, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (it >= 0) times.push_back(us);
  }
  unsigned long long wrong = 0;
  if (check) {
    std::vector<std::byte> want;
    sparcoll::perf::reference(spec, *rop, &want);
    wrong = sparcoll::perf::count_wrong(work, want, spec.dtype, nullptr);
  }
  MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) {
    sparcoll::perf::ResultRow row;
    row.system = "mpi";
    row.algo = label;
    row.transport = "mpi";
    row.ranks = size;
    row.elements = spec.count;
    row.dtype = dtype;
    row.op = op;
    row.density = spec.density;
    row.pattern = pattern;
    row.block = spec.block_elems;
    row.iters = iters;
    row.wrong = wrong;
    // A dense allreduce moves about 2(n-1)/n of the tensor in and out of each rank.
    row.wire_bytes_per_rank = 2.0 * 2.0 * (size - 1) / size * static_cast<double>(spec.count * sparcoll::dtype_size(spec.dtype));
    sparcoll::perf::summarize(times, spec.count * sparcoll::dtype_size(spec.dtype), &row);
    if (header) std::printf("%s\n", sparcoll::perf::table_header().c_str());
    std::printf("%s\n", sparcoll::perf::table_row(row).c_str());
    std::string error;
    if (!json.empty() && !sparcoll::perf::append_json(json, row, &error)) std::fprintf(stderr, "%s\n", error.c_str());
  }
  MPI_Finalize();
  return wrong == 0 ? 0 : 1;
}
