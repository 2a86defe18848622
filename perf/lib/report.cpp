#include "report.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace sparcoll::perf {

void summarize(std::vector<double> times_us, std::size_t bytes, ResultRow* row) {
  if (times_us.empty()) return;
  std::sort(times_us.begin(), times_us.end());
  const std::size_t n = times_us.size();
  row->time_us_median = n % 2 ? times_us[n / 2] : 0.5 * (times_us[n / 2 - 1] + times_us[n / 2]);
  const std::size_t p99 = std::min(n - 1, static_cast<std::size_t>(std::ceil(0.99 * static_cast<double>(n))) - 1);
  row->time_us_p99 = times_us[p99];
  // nccl-tests definitions: algbw = bytes / time; busbw = algbw * 2(n-1)/n for allreduce.
  row->algbw_GBps = row->time_us_median > 0 ? static_cast<double>(bytes) / (row->time_us_median * 1e3) : 0;
  row->busbw_GBps = row->ranks > 0 ? row->algbw_GBps * 2.0 * (row->ranks - 1) / row->ranks : 0;
}

std::string table_header() {
  char line[512];
  std::snprintf(line, sizeof line, "# %-8s %-13s %-9s %5s %11s %-5s %-4s %8s %-9s %5s %12s %12s %9s %9s %12s %7s",
                "system", "algo", "transport", "ranks", "elements", "dtype", "op", "density", "pattern", "block",
                "time_us", "p99_us", "algbw", "busbw", "wire_MB/rank", "#wrong");
  return line;
}

std::string table_row(const ResultRow& r) {
  char line[512];
  std::snprintf(line, sizeof line, "  %-8s %-13s %-9s %5d %11llu %-5s %-4s %8.4f %-9s %5u %12.1f %12.1f %9.3f %9.3f %12.3f %7llu",
                r.system.c_str(), r.algo.c_str(), r.transport.c_str(), r.ranks,
                static_cast<unsigned long long>(r.elements), r.dtype.c_str(), r.op.c_str(), r.density,
                r.pattern.c_str(), r.block, r.time_us_median, r.time_us_p99, r.algbw_GBps, r.busbw_GBps,
                r.wire_bytes_per_rank / 1e6, static_cast<unsigned long long>(r.wrong));
  return line;
}

std::string to_json(const ResultRow& r) {
  char line[1024];
  std::snprintf(line, sizeof line,
                "{\"system\":\"%s\",\"algo\":\"%s\",\"transport\":\"%s\",\"ranks\":%d,\"elements\":%llu,"
                "\"dtype\":\"%s\",\"op\":\"%s\",\"density\":%.6g,\"pattern\":\"%s\",\"block\":%u,\"iters\":%d,"
                "\"time_us_median\":%.3f,\"time_us_p99\":%.3f,\"algbw_GBps\":%.6f,\"busbw_GBps\":%.6f,"
                "\"wire_bytes_per_rank\":%.0f,\"wrong\":%llu}",
                r.system.c_str(), r.algo.c_str(), r.transport.c_str(), r.ranks,
                static_cast<unsigned long long>(r.elements), r.dtype.c_str(), r.op.c_str(), r.density,
                r.pattern.c_str(), r.block, r.iters, r.time_us_median, r.time_us_p99, r.algbw_GBps, r.busbw_GBps,
                r.wire_bytes_per_rank, static_cast<unsigned long long>(r.wrong));
  return line;
}

bool append_json(const std::string& path, const ResultRow& row, std::string* error) {
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (f == nullptr) {
    *error = "cannot open " + path + ": " + std::strerror(errno);
    return false;
  }
  std::fprintf(f, "%s\n", to_json(row).c_str());
  std::fclose(f);
  return true;
}

}  // namespace sparcoll::perf
