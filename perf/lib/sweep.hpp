// The sweep flags every benchmark program of the perf suite accepts (sparcoll-perf and the
// peers in perf/peers/), parsed and checked in one place so they mean the same everywhere.
//
// Sizes follow nccl-tests: -b MINBYTES -e MAXBYTES -f FACTOR (suffixes K, M, G = 2^10, 2^20,
// 2^30; FACTOR defaults to 2); sizes are MINBYTES x FACTOR^k up to MAXBYTES, and MAXBYTES itself is measured
// last (nccl-tests stops at the last power below it). --elements N gives one size in elements
// instead. Lists are comma-separated: --density 0,0.001,0.01 --dtype f32,bf16 --block 256,1024.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sparcoll::perf {

struct SweepOptions {
  std::vector<std::uint64_t> sizes_bytes;   // filled by finish_sweep from -b/-e/-f
  std::uint64_t elements = 0;               // --elements: one size in elements (exclusive with -b/-e)
  std::vector<double> densities = {0.01};
  std::vector<std::string> dtypes = {"f32"};
  std::string op = "sum";
  std::vector<std::string> patterns = {"random"};  // random | overlap | disjoint | one_dense | trace:FILE
  std::vector<std::uint32_t> blocks;        // empty: the program's default (sparcoll: the communicator's)
  int iters = 20;
  int warmup = 3;
  int min_iters = 0;                        // with --time-budget: at least this many (0: 5, or iters if fewer)
  double time_budget_s = 0;                 // > 0: iterations per point ~ budget / warm-up time, in [min_iters, iters]
  std::uint64_t settle_ms = 0;              // > 0: allreduces for this long before the first point
  std::uint64_t seed = 1;
  std::uint64_t bucket_mb = 0;              // --bucket-mb: a trace's step as DDP buckets of this many MiB (0: whole)
  std::string json, csv, baseline;
  bool header = true;

  // Raw -b/-e/-f as given (0: not given).
  std::uint64_t min_bytes = 0, max_bytes = 0, factor = 0;
};

enum class FlagResult { not_mine, ok, error };

// Tries argv[*i] as a sweep flag; consumes its value (advancing *i). On error, *error says why.
FlagResult parse_sweep_flag(int argc, char** argv, int* i, SweepOptions* options, std::string* error);

// Checks combinations and computes sizes_bytes; false with *error naming the problem.
bool finish_sweep(SweepOptions* options, std::string* error);

// The sizes to run for `dtype` in elements: --elements, or each size in bytes / element size.
std::vector<std::uint64_t> sweep_elements(const SweepOptions& options, const std::string& dtype);

// The common flags' usage text, for the programs' --help and errors.
std::string sweep_usage();

// Helpers shared by the programs' own flags.
bool parse_u64(const std::string& text, std::uint64_t* out);
bool parse_size(const std::string& text, std::uint64_t* out);  // integer with optional K/M/G suffix
std::vector<std::string> split_list(const std::string& text);
bool is_trace_pattern(const std::string& pattern);
std::string trace_path(const std::string& pattern);

}  // namespace sparcoll::perf
