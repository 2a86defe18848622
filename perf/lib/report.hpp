// Benchmark output: one result row per measured point, printed nccl-tests style, as CSV and as
// JSON lines. Shared by sparcoll-perf and the peer programs (perf/peers/) so every system
// reports the same columns and fields.
//
// JSON lines: every line is one object with a "kind":
//   "header"  one per program run: tool, host, cpu, commit, transport, ranks, options
//   "row"     one measured point (fields of ResultRow below)
//   "missing" / "failed"   a system that could not run (written by scripts/bench-all)
//   "kernel"  a kernel throughput (sparcoll-perf-kernels)
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace sparcoll::perf {

struct ResultRow {
  std::string system = "sparcoll";  // sparcoll | mpi | gloo
  std::string algo;
  std::string transport;            // sparcoll: the driver; peers: what they ran over (shm, tcp)
  int aggregators = 0;              // sparcoll: dedicated aggregator processes (0: co-located)
  int ranks = 1;
  std::uint64_t elements = 0;
  std::string dtype;
  std::string op;
  double density = 0;               // fraction of non-zero blocks per rank (mean over ranks)
  std::string pattern;
  std::uint32_t block = 0;
  int iters = 0;
  int warmup = 0;
  double time_us_median = 0;
  double time_us_p99 = 0;
  double algbw_GBps = 0;            // dense-equivalent: elements x dtype size / time
  double busbw_GBps = 0;            // algbw x 2(n-1)/n
  double sent_bytes_per_rank = 0;   // per iteration, mean over ranks
  double recv_bytes_per_rank = 0;
  double wire_bytes_per_rank = 0;   // sent + received
  std::string bytes_source = "measured";  // measured (transport counters) | model (dense algorithm's formula)
  double speedup = 0;               // fastest dense peer's median / this median; 0: no peer to compare with
  std::string speedup_vs;           // which peer, "mpi/default"
  std::uint64_t wrong = 0;          // wrong elements, summed over ranks (the last iteration's result)
  std::string host;
  std::string commit;

  std::uint64_t bytes() const;      // elements x dtype size
};

// What a program run measured, printed once before its rows.
struct RunHeader {
  std::string tool;
  std::string transport;
  int ranks = 0;
  int aggregators = 0;
  std::string options;  // command line and the SPARCOLL_* settings in force
};

// Median and 99th percentile of per-iteration times (microseconds); fills the bandwidth columns.
void summarize(std::vector<double> times_us, std::size_t bytes, ResultRow* row);

std::string table_header();
std::string table_row(const ResultRow& row);
std::string to_json(const ResultRow& row);
std::string csv_header();
std::string to_csv(const ResultRow& row);

// "# key: value" lines (table and CSV) and the JSON "header" object for a run.
std::string header_lines(const RunHeader& header);
std::string header_json(const RunHeader& header);

// Appends one JSON object per line (JSON Lines), so one file collects a whole sweep.
bool append_json(const std::string& path, const ResultRow& row, std::string* error);
// Appends a row; the column titles go first when the file does not have them yet.
bool append_csv(const std::string& path, const ResultRow& row, std::string* error);
// Appends text as is (it should end with a newline).
bool append_text(const std::string& path, const std::string& text, std::string* error);

// This machine and build: host name, CPU model, and the git commit the perf suite was built
// from (`git describe` at build time; "unknown" outside a git checkout).
std::string host_name();
std::string cpu_model();
const char* build_commit();

std::string json_escape(const std::string& text);
// Parses one flat JSON object (strings, numbers, true/false/null; no nesting) into field ->
// value (strings unescaped, other values as written). False on anything else.
bool parse_flat_json(const std::string& line, std::map<std::string, std::string>* out);

// Dense peers' rows from a JSON lines file written by the peers (rows of other systems than
// sparcoll); a missing file gives no rows and no error.
bool load_peer_rows(const std::string& path, std::vector<ResultRow>* rows, std::string* error);
// Fills row->speedup and row->speedup_vs from the fastest peer row measured on the same point
// (ranks, elements, dtype, op, density, pattern, block) over the same kind of transport.
void apply_speedup(const std::vector<ResultRow>& peers, ResultRow* row);

}  // namespace sparcoll::perf
