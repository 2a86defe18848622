// One benchmark result row: printed nccl-tests style and written as JSON. Shared by
// sparcoll-perf and the peer programs (perf/peers/) so every system reports the same columns.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sparcoll::perf {

struct ResultRow {
  std::string system = "sparcoll";  // sparcoll | mpi | gloo
  std::string algo;
  std::string transport;
  int ranks = 1;
  std::uint64_t elements = 0;
  std::string dtype;
  std::string op;
  double density = 0;
  std::string pattern;
  std::uint32_t block = 0;
  int iters = 0;
  double time_us_median = 0;
  double time_us_p99 = 0;
  double algbw_GBps = 0;
  double busbw_GBps = 0;
  double wire_bytes_per_rank = 0;  // sent + received through the transport, per iteration
  std::uint64_t wrong = 0;
};

// Median and 99th percentile of per-iteration times (microseconds); fills the bandwidth columns.
void summarize(std::vector<double> times_us, std::size_t bytes, ResultRow* row);
std::string table_header();
std::string table_row(const ResultRow& row);
std::string to_json(const ResultRow& row);
// Appends one JSON object per line (JSON Lines), so one file collects a whole sweep.
bool append_json(const std::string& path, const ResultRow& row, std::string* error);

}  // namespace sparcoll::perf
