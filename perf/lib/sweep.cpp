#include "sweep.hpp"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <sstream>

#include "sparcoll/types.hpp"
#include "workload.hpp"

namespace sparcoll::perf {

bool parse_u64(const std::string& text, std::uint64_t* out) {
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return false;
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  *out = v;
  return true;
}

bool parse_size(const std::string& text, std::uint64_t* out) {
  std::string digits = text;
  std::uint64_t scale = 1;
  if (!digits.empty()) {
    switch (std::toupper(static_cast<unsigned char>(digits.back()))) {
      case 'K': scale = 1ull << 10; break;
      case 'M': scale = 1ull << 20; break;
      case 'G': scale = 1ull << 30; break;
      default: break;
    }
    if (scale != 1) digits.pop_back();
  }
  std::uint64_t v = 0;
  if (!parse_u64(digits, &v) || v > (~0ull) / scale) return false;
  *out = v * scale;
  return true;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) parts.push_back(part);
  if (!text.empty() && text.back() == ',') parts.push_back("");
  return parts;
}

bool is_trace_pattern(const std::string& pattern) { return pattern.rfind("trace:", 0) == 0; }
std::string trace_path(const std::string& pattern) { return pattern.substr(6); }

FlagResult parse_sweep_flag(int argc, char** argv, int* i, SweepOptions* o, std::string* error) {
  std::string flag = argv[*i];
  std::string inline_value;
  bool has_inline = false;
  if (flag.rfind("--", 0) == 0) {
    const auto eq = flag.find('=');
    if (eq != std::string::npos) {
      inline_value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
      has_inline = true;
    }
  }
  static const char* const kWithValue[] = {"-b", "--minbytes", "-e", "--maxbytes", "-f", "--stepfactor", "--elements",
                                           "-d", "--density", "--dtype", "--op", "--pattern", "--block", "--iters",
                                           "-n", "--warmup", "-w", "--min-iters", "--time-budget", "--settle-ms", "--seed", "--bucket-mb", "--json",
                                           "--csv", "--baseline"};
  bool takes_value = false;
  for (const char* f : kWithValue) takes_value = takes_value || flag == f;
  if (!takes_value) {
    if (flag == "--check") return FlagResult::ok;  // every run checks; kept for old command lines
    if (flag == "--no-header") {
      o->header = false;
      return FlagResult::ok;
    }
    return FlagResult::not_mine;
  }
  std::string value;
  if (has_inline) {
    value = inline_value;
  } else {
    if (*i + 1 >= argc) {
      *error = "missing value after " + flag;
      return FlagResult::error;
    }
    value = argv[++*i];
  }
  auto fail = [&](const std::string& why) {
    *error = flag + " " + value + ": " + why;
    return FlagResult::error;
  };
  std::uint64_t n = 0;
  if (flag == "-b" || flag == "--minbytes") {
    if (!parse_size(value, &o->min_bytes) || o->min_bytes == 0) return fail("takes a size in bytes > 0 (suffix K, M or G allowed)");
  } else if (flag == "-e" || flag == "--maxbytes") {
    if (!parse_size(value, &o->max_bytes) || o->max_bytes == 0) return fail("takes a size in bytes > 0 (suffix K, M or G allowed)");
  } else if (flag == "-f" || flag == "--stepfactor") {
    if (!parse_u64(value, &o->factor) || o->factor == 0) return fail("takes an integer factor >= 2");
  } else if (flag == "--elements") {
    if (!parse_u64(value, &o->elements) || o->elements == 0) return fail("takes a positive integer");
  } else if (flag == "-d" || flag == "--density") {
    o->densities.clear();
    for (const std::string& part : split_list(value)) {
      char* end = nullptr;
      const double d = std::strtod(part.c_str(), &end);
      if (part.empty() || end == part.c_str() || *end != '\0' || !(d >= 0.0 && d <= 1.0))
        return fail("densities are numbers in [0, 1] (a fraction of blocks: 0.01 is 1%)");
      o->densities.push_back(d);
    }
  } else if (flag == "--dtype") {
    o->dtypes.clear();
    for (const std::string& part : split_list(value)) {
      const auto dtype = parse_dtype(part);
      if (!dtype || dtype_is_wide(*dtype)) return fail("unknown dtype '" + part + "' (f32, f16, bf16, i32)");
      o->dtypes.push_back(part);
    }
  } else if (flag == "--op") {
    // The ops whose results the benchmark's reference (workload.hpp) can check.
    const auto op = parse_reduce_op(value);
    if (!op || (*op != ReduceOp::sum && *op != ReduceOp::avg && *op != ReduceOp::min && *op != ReduceOp::max))
      return fail("unknown op (sum, avg, min, max: the ones the benchmark checks results of)");
    o->op = value;
  } else if (flag == "--pattern") {
    o->patterns.clear();
    for (const std::string& part : split_list(value)) {
      Pattern p;
      if (is_trace_pattern(part)) {
        if (trace_path(part).empty()) return fail("trace:FILE needs a file");
      } else if (!parse_pattern(part, &p)) {
        return fail("unknown pattern '" + part + "' (random, overlap, disjoint, one_dense, dense_half, trace:FILE)");
      }
      o->patterns.push_back(part);
    }
  } else if (flag == "--block") {
    o->blocks.clear();
    for (const std::string& part : split_list(value)) {
      if (!parse_u64(part, &n) || n == 0 || n > (1u << 20)) return fail("block sizes are integers in [1, 1048576] elements");
      o->blocks.push_back(static_cast<std::uint32_t>(n));
    }
  } else if (flag == "--iters" || flag == "-n") {
    if (!parse_u64(value, &n) || n == 0 || n > 1000000) return fail("takes an integer in [1, 1000000]");
    o->iters = static_cast<int>(n);
  } else if (flag == "--warmup" || flag == "-w") {
    if (!parse_u64(value, &n) || n > 1000000) return fail("takes an integer in [0, 1000000]");
    o->warmup = static_cast<int>(n);
  } else if (flag == "--min-iters") {
    if (!parse_u64(value, &n) || n == 0 || n > 1000000) return fail("takes an integer in [1, 1000000]");
    o->min_iters = static_cast<int>(n);
  } else if (flag == "--time-budget") {
    char* end = nullptr;
    o->time_budget_s = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0' || !(o->time_budget_s >= 0 && o->time_budget_s <= 3600))
      return fail("takes seconds in [0, 3600]");
  } else if (flag == "--settle-ms") {
    if (!parse_u64(value, &o->settle_ms) || o->settle_ms > 60000) return fail("takes milliseconds in [0, 60000]");
  } else if (flag == "--seed") {
    if (!parse_u64(value, &o->seed)) return fail("takes a non-negative integer");
  } else if (flag == "--bucket-mb") {
    if (!parse_u64(value, &o->bucket_mb) || o->bucket_mb == 0 || o->bucket_mb > 4096)
      return fail("takes MiB per bucket, 1 to 4096");
  } else if (flag == "--json") {
    if (value.empty()) return fail("needs a file name");
    o->json = value;
  } else if (flag == "--csv") {
    if (value.empty()) return fail("needs a file name");
    o->csv = value;
  } else if (flag == "--baseline") {
    if (value.empty()) return fail("needs a file name");
    o->baseline = value;
  }
  return FlagResult::ok;
}

bool finish_sweep(SweepOptions* o, std::string* error) {
  const bool have_range = o->min_bytes != 0 || o->max_bytes != 0;
  if (have_range && o->elements != 0) {
    *error = "--elements and -b/-e both give the size: use one of them";
    return false;
  }
  if (o->factor != 0 && !have_range) {
    *error = "-f (stepfactor) needs -b/-e (a range of sizes)";
    return false;
  }
  bool any_trace = false, any_synthetic = false;
  for (const std::string& p : o->patterns) (is_trace_pattern(p) ? any_trace : any_synthetic) = true;
  if (any_trace && !(o->dtypes.size() == 1 && o->dtypes[0] == "f32")) {
    *error = "--pattern trace:FILE replays fp32 gradients: it needs --dtype f32 alone";
    return false;
  }
  if (any_trace && o->op != "sum" && o->op != "avg") {
    *error = "--pattern trace:FILE replays gradients: --op must be sum or avg";
    return false;
  }
  if (have_range) {
    if (o->min_bytes == 0) o->min_bytes = o->max_bytes;
    if (o->max_bytes == 0) o->max_bytes = o->min_bytes;
    if (o->min_bytes > o->max_bytes) {
      *error = "-b (minbytes) " + std::to_string(o->min_bytes) + " is larger than -e (maxbytes) " +
               std::to_string(o->max_bytes);
      return false;
    }
    if (o->factor == 0) o->factor = 2;
    if (o->min_bytes != o->max_bytes && o->factor < 2) {
      *error = "-f (stepfactor) " + std::to_string(o->factor) + " must be at least 2 for a range of sizes";
      return false;
    }
    for (const std::string& dt : o->dtypes) {
      const auto t = parse_dtype(dt);
      if (o->min_bytes < dtype_size(*t)) {
        *error = "-b " + std::to_string(o->min_bytes) + " is smaller than one " + dt + " element";
        return false;
      }
    }
    o->sizes_bytes.clear();
    for (std::uint64_t s = o->min_bytes; s <= o->max_bytes;) {
      o->sizes_bytes.push_back(s);
      if (o->factor < 2 || s > o->max_bytes / o->factor) break;
      s *= o->factor;
    }
    if (o->sizes_bytes.back() != o->max_bytes) o->sizes_bytes.push_back(o->max_bytes);
  } else if (o->elements == 0) {
    o->elements = 1u << 20;
  }
  if (o->time_budget_s > 0) {
    if (o->min_iters == 0) o->min_iters = std::min(5, o->iters);
    if (o->min_iters > o->iters) {
      *error = "--min-iters " + std::to_string(o->min_iters) + " is larger than --iters " + std::to_string(o->iters);
      return false;
    }
  } else if (o->min_iters != 0) {
    *error = "--min-iters only applies with --time-budget";
    return false;
  }
  (void)any_synthetic;
  return true;
}

std::vector<std::uint64_t> sweep_elements(const SweepOptions& o, const std::string& dtype) {
  if (o.sizes_bytes.empty()) return {o.elements};
  const std::size_t esize = dtype_size(*parse_dtype(dtype));
  std::vector<std::uint64_t> out;
  for (std::uint64_t b : o.sizes_bytes) {
    const std::uint64_t n = b / esize;
    if (out.empty() || out.back() != n) out.push_back(n);
  }
  return out;
}

std::string sweep_usage() {
  return "sweep (the same flags for sparcoll-perf and every peer):\n"
         "  -b, --minbytes SIZE   -e, --maxbytes SIZE   -f, --stepfactor F   sizes minbytes x F^k, then maxbytes\n"
         "                        (K, M, G suffixes; F defaults to 2; nccl-tests style)\n"
         "  --elements N          one size in elements instead of -b/-e (default 1048576)\n"
         "  -d, --density LIST    fractions of non-zero blocks per rank, e.g. 0,0.001,0.01,0.1,1 (default 0.01)\n"
         "  --dtype LIST          f32,f16,bf16,i32 (default f32)     --op sum|avg|min|max (default sum)\n"
         "  --pattern LIST        random (OmniReduce: random blocks, seeded by rank), overlap (all ranks the\n"
         "                        same blocks), disjoint, one_dense (rank 0 dense), dense_half (first half dense on every rank),\n"
         "                        trace:FILE (gradient trace)\n"
         "  --block LIST          elements per block (default: the communicator's / 256)\n"
         "  --iters N             timed iterations (default 20)   --warmup N (default 3)\n"
         "  --time-budget S       iterations per point ~ S / warm-up time, at least --min-iters (default 5);\n"
         "                        one warm-up only when it takes over S/4; stops after 2 S of wall time\n"
         "  --settle-ms MS        small allreduces for MS ms before the first point, so that it is measured\n"
         "                        once the scheduler has placed the ranks, not just after they started (default 0)\n"
         "  --seed N              data seed (default 1)\n"
         "  --bucket-mb N         a trace's step as DDP sends it: one allreduce per bucket of consecutive\n"
         "                        parameters (at least N MiB, the last smaller), back to back (pattern trace:NAME/bN)\n"
         "  --json FILE           append JSON lines (a header object, then one object per row)\n"
         "  --csv FILE            append CSV rows (column titles when the file is new)\n"
         "  --baseline FILE       JSON lines with the dense peers' rows: fills the speed-up column\n"
         "  --no-header           no header lines before the rows\n"
         "  (--check is accepted and does nothing: every point is checked)\n";
}

}  // namespace sparcoll::perf
