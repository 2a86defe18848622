#include "flags.hpp"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <cstdlib>
#include <sstream>

namespace sparcoll::soak {

namespace {

const char* const kUsage =
    "usage: sparcoll-run -n N [--aggregators M] [--transport T] -- sparcoll-soak [flags]\n"
    "  --ops N               collectives to run (default 20000)\n"
    "  --cycles K            then K communicators created and destroyed (default 0; co-located only)\n"
    "  --sample-every S      sample RSS, fds and threads every S ops (default ops/40)\n"
    "  --warmup F            fraction of the ops (and cycles) before the baseline sample (default 0.1)\n"
    "  --rss-limit-mib M     RSS may grow after warm-up by the larger of M MiB (default 8)\n"
    "  --rss-limit-percent P and P % of the baseline (default 5)\n"
    "  --heap-limit-mib M    malloc's bytes in use may grow after warm-up by the larger of M MiB (default 4)\n"
    "  --heap-limit-percent P and P % of the baseline (default 5)\n"
    "  --max-bytes SIZE      largest tensor, e.g. 1M (default 16M)\n"
    "  --kinds LIST          allreduce,broadcast,allgather,reduce_scatter,barrier,sparse,compressed,rejected,\n"
    "                        reduce,gather,scatter,all_to_all,p2p,coalesced\n"
    "                        (default: all)\n"
    "  --max-batch N         most non-blocking calls in flight at once (default 8; 1: none)\n"
    "  --check-every N       check the results of every Nth step (default 1: all)\n"
    "  --seed S              the mix's seed, the same on every rank (default 1)\n"
    "  --json FILE           append the samples and the verdict as JSON lines (rank 0)\n"
    "  --progress            print each sample as it is taken (rank 0)\n"
    "  --log-calls           print every call as it starts (rank 0)\n"
    "  --malloc-default      keep glibc's growing mmap threshold (default: fixed at 128 KiB, so freed\n"
    "                        big blocks leave RSS and RSS follows the live memory)\n";

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr, "sparcoll-soak: %s\n%s", why.c_str(), kUsage);
  std::exit(2);
}

std::uint64_t parse_count(const std::string& flag, const std::string& v, std::uint64_t min) {
  char* end = nullptr;
  const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || v[0] == '-' || n < min)
    usage(flag + " wants a whole number of at least " + std::to_string(min) + ", not '" + v + "'");
  return n;
}

double parse_number(const std::string& flag, const std::string& v, double min, double max) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !(x >= min && x <= max))
    usage(flag + " wants a number in [" + std::to_string(min) + ", " + std::to_string(max) + "], not '" + v + "'");
  return x;
}

// "4096", "64K", "16M", "1G".
std::size_t parse_bytes(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
  std::size_t scale = 1;
  const std::string unit = end;
  if (unit == "K" || unit == "k") scale = 1024;
  else if (unit == "M" || unit == "m") scale = std::size_t{1} << 20;
  else if (unit == "G" || unit == "g") scale = std::size_t{1} << 30;
  else if (!unit.empty()) usage(flag + ": unknown unit in '" + v + "' (K, M or G)");
  if (v.empty() || v[0] == '-' || n == 0) usage(flag + " wants a size such as 16M, not '" + v + "'");
  return static_cast<std::size_t>(n) * scale;
}

}  // namespace

Flags parse_flags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i], inline_value;
    bool has_inline = false;
    if (const auto eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) {
      inline_value = a.substr(eq + 1);
      a = a.substr(0, eq);
      has_inline = true;
    }
    if (a == "-h" || a == "--help") {
      std::printf("%s", kUsage);
      std::exit(0);
    }
    if (a == "--progress" || a == "--malloc-default" || a == "--log-calls") {
      (a == "--progress" ? f.progress : a == "--log-calls" ? f.log_calls : f.malloc_default) = true;
      continue;
    }
    static const char* const kValued[] = {"--ops",           "--cycles",          "--sample-every",       "--warmup",
                                          "--rss-limit-mib", "--rss-limit-percent", "--heap-limit-mib",
                                          "--heap-limit-percent", "--max-bytes",   "--max-batch",
                                          "--check-every",   "--seed",            "--json",               "--kinds"};
    if (std::find(std::begin(kValued), std::end(kValued), a) == std::end(kValued)) usage("unknown flag " + a);
    if (!has_inline && i + 1 >= argc) usage("missing value after " + a);
    const std::string v = has_inline ? inline_value : argv[++i];
    if (a == "--ops") f.ops = parse_count(a, v, 1);
    else if (a == "--cycles") f.cycles = parse_count(a, v, 0);
    else if (a == "--sample-every") f.sample_every = parse_count(a, v, 1);
    else if (a == "--warmup") f.warmup = parse_number(a, v, 0, 0.9);
    else if (a == "--rss-limit-mib") f.limits.rss_mib = parse_number(a, v, 0, 1e6);
    else if (a == "--rss-limit-percent") f.limits.rss_percent = parse_number(a, v, 0, 1000);
    else if (a == "--heap-limit-mib") f.limits.heap_mib = parse_number(a, v, 0, 1e6);
    else if (a == "--heap-limit-percent") f.limits.heap_percent = parse_number(a, v, 0, 1000);
    else if (a == "--max-bytes") f.max_bytes = parse_bytes(a, v);
    else if (a == "--max-batch") f.max_batch = static_cast<int>(parse_count(a, v, 1));
    else if (a == "--check-every") f.check_every = parse_count(a, v, 1);
    else if (a == "--seed") f.seed = parse_count(a, v, 0);
    else if (a == "--json") f.json = v;
    else if (a == "--kinds") {
      std::stringstream in(v);
      std::string name;
      while (std::getline(in, name, ',')) {
        Kind k;
        if (!parse_kind(name, &k)) usage("unknown kind '" + name + "' in --kinds");
        f.kinds.push_back(k);
      }
      if (f.kinds.empty()) usage("--kinds is empty");
    } else {
      usage("unknown flag " + a);
    }
  }
  if (f.max_batch > 64) usage("--max-batch is at most 64");
  if (f.sample_every == 0) f.sample_every = std::max<std::uint64_t>(1, f.ops / 40);
#if defined(__SANITIZE_ADDRESS__)
  f.limits.judge_rss = false;  // samples.hpp, Limits::judge_rss
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  f.limits.judge_rss = false;
#endif
#endif
  return f;
}

}  // namespace sparcoll::soak
