// The soak's samples (every process's RSS, descriptors, threads and mappings at an op index), the
// table and JSON lines they print as, and the verdict: after warm-up RSS and malloc's bytes in
// use may grow only within a limit (measured to the least of the last three samples),
// descriptors and threads must not change at all.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "proc_stats.hpp"

namespace sparcoll::soak {

struct Sample {
  std::string phase;        // "ops" (the mixed collectives) or "cycles" (create/destroy)
  std::uint64_t index = 0;  // ops or cycles done when it was taken
  double elapsed_s = 0;     // since the soak started, on rank 0
  double load1 = -1;        // the host's 1-minute load average
  std::vector<ProcStats> procs;  // one per name of the recorder: ranks, then aggregators
};

struct Limits {
  // Whether RSS is judged at all: not under AddressSanitizer, whose RSS holds the quarantine of
  // freed blocks (up to 256 MiB) and the fake stacks of detect_stack_use_after_return, so it
  // grows without a leak (seen: +30 MiB with malloc's bytes in use flat); LeakSanitizer checks
  // for leaks at exit there instead.
  bool judge_rss = true;
  // RSS may grow after warm-up by the larger of these two.
  double rss_mib = 8;
  double rss_percent = 5;
  // The bytes malloc has handed out and not had back (ranks only) may grow by the larger of these
  // two: a leak shows here before it shows in RSS. The percentage leaves room for the library's
  // scratch buffers, kept at the largest size a collective has needed, which can still step up
  // after warm-up when a later call needs a buffer in another role (+33 MiB at 16 MiB tensors on
  // 4 ranks, docs/perf.md "Soak").
  double heap_mib = 4;
  double heap_percent = 5;
};

// One process's figures over a phase.
struct Figures {
  std::string name;
  ProcStats start, warm, end;
  std::int64_t rss_peak_kib = 0;  // largest after warm-up
};

struct Verdict {
  bool ok = true;
  bool judged = false;          // false: no sample after warm-up to compare with
  std::uint64_t warm_index = 0;  // the sample the end is compared with
  std::vector<std::string> failures;  // each names the process and the figure
  std::vector<Figures> figures;
};

// Judges one phase. `warm_index`: the first sample at or after this index is the baseline.
Verdict judge(const std::vector<Sample>& samples, const std::string& phase, std::uint64_t warm_index,
              const std::vector<std::string>& names, const Limits& limits);

// Per sample: index, time, load, then RSS MiB / fds / threads of every process.
void print_table(std::FILE* out, const std::vector<Sample>& samples, const std::string& phase,
                 const std::vector<std::string>& names);
// One line as the sample is taken (--progress).
void print_progress(std::FILE* out, const Sample& sample, const std::vector<std::string>& names);

// JSON lines: "soak_header" (header_fields, already JSON members), then one "soak_sample" per
// process per sample, then one "soak_verdict" per phase (verdict_fields[i] belongs to
// verdicts[i]). Throws std::runtime_error when the file cannot be written.
void write_json(const std::string& path, const std::string& header_fields, const std::vector<Sample>& samples,
                const std::vector<std::string>& names, const std::vector<std::pair<std::string, Verdict>>& verdicts,
                const std::vector<std::string>& verdict_fields);

// A JSON string literal.
std::string json_string(const std::string& s);

}  // namespace sparcoll::soak
