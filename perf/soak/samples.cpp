#include "samples.hpp"

#include <algorithm>
#include <fstream>
#include <stdexcept>

namespace sparcoll::soak {

namespace {

double mib(std::int64_t kib) { return static_cast<double>(kib) / 1024.0; }

std::string fixed(double v, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, v);
  return buffer;
}

std::string at(const Sample& s) { return std::string(s.phase == "cycles" ? "cycle " : "op ") + std::to_string(s.index); }

// A count that must stay flat after warm-up: every later sample equal to the baseline.
void check_flat(const char* what, std::int64_t ProcStats::*field, const std::vector<const Sample*>& after,
                std::size_t p, const std::string& name, std::vector<std::string>* failures) {
  const std::int64_t base = after.front()->procs[p].*field;
  for (const Sample* s : after) {
    const std::int64_t v = s->procs[p].*field;
    if (v == base || v < 0) continue;
    const std::int64_t end = after.back()->procs[p].*field;
    failures->push_back(name + ": " + what + " not flat: " + std::to_string(base) + " after warm-up (" +
                        at(*after.front()) + "), " + std::to_string(v) + " at " + at(*s) + ", " + std::to_string(end) +
                        " at the end (" + at(*after.back()) + ")");
    return;
  }
}

}  // namespace

Verdict judge(const std::vector<Sample>& samples, const std::string& phase, std::uint64_t warm_index,
              const std::vector<std::string>& names, const Limits& limits) {
  Verdict v;
  std::vector<const Sample*> mine, after;
  for (const Sample& s : samples)
    if (s.phase == phase) {
      mine.push_back(&s);
      if (s.index >= warm_index) after.push_back(&s);
    }
  if (mine.empty()) return v;
  if (after.empty()) after.push_back(mine.back());
  v.warm_index = after.front()->index;
  v.judged = after.size() >= 2;
  for (std::size_t p = 0; p < names.size(); ++p) {
    Figures f;
    f.name = names[p];
    f.start = mine.front()->procs[p];
    f.warm = after.front()->procs[p];
    f.end = after.back()->procs[p];
    for (const Sample* s : after) f.rss_peak_kib = std::max(f.rss_peak_kib, s->procs[p].rss_kib);
    v.figures.push_back(f);
    if (!v.judged) continue;
    // The end is the least of the last three samples: a buffer the library still holds when
    // one sample is taken and releases at a later call is not growth; a leak is in all three.
    auto settled = [&](std::int64_t ProcStats::*field) {
      const Sample* least = after.back();
      for (std::size_t k = after.size() > 3 ? after.size() - 3 : 1; k < after.size(); ++k)
        if (after[k]->procs[p].*field < least->procs[p].*field) least = after[k];
      return least;
    };
    auto grew = [&](const char* what, std::int64_t ProcStats::*field, double allowed) {
      const std::int64_t base = f.warm.*field;
      const Sample* end = settled(field);
      const std::int64_t last = end->procs[p].*field;
      if (base < 0 || last < 0 || mib(last - base) <= allowed) return;
      v.failures.push_back(f.name + ": " + what + " grew " + fixed(mib(last - base), 1) + " MiB after warm-up (" +
                           at(*after.front()) + ": " + fixed(mib(base), 1) + " MiB, " + at(*end) + ": " +
                           fixed(mib(last), 1) + " MiB), more than the " + fixed(allowed, 1) + " MiB allowed");
    };
    if (limits.judge_rss)
      grew("rss", &ProcStats::rss_kib, std::max(limits.rss_mib, limits.rss_percent / 100.0 * mib(f.warm.rss_kib)));
    grew("heap in use", &ProcStats::heap_kib, std::max(limits.heap_mib, limits.heap_percent / 100.0 * mib(f.warm.heap_kib)));
    check_flat("fds", &ProcStats::fds, after, p, f.name, &v.failures);
    check_flat("threads", &ProcStats::threads, after, p, f.name, &v.failures);
  }
  v.ok = v.failures.empty();
  return v;
}

void print_table(std::FILE* out, const std::vector<Sample>& samples, const std::string& phase,
                 const std::vector<std::string>& names) {
  std::fprintf(out, "# %-8s %8s %6s", phase == "cycles" ? "cycle" : "op", "time_s", "load");
  for (const std::string& n : names)
    std::fprintf(out, " | %-6s %8s %8s %4s %4s", n.c_str(), "rss_MiB", "heap_MiB", "fds", "thr");
  std::fprintf(out, "\n");
  for (const Sample& s : samples) {
    if (s.phase != phase) continue;
    std::fprintf(out, "  %-8llu %8.1f %6.2f", static_cast<unsigned long long>(s.index), s.elapsed_s, s.load1);
    for (const ProcStats& p : s.procs)
      std::fprintf(out, " | %-6s %8.1f %8s %4lld %4lld", "", mib(p.rss_kib),
                   p.heap_kib < 0 ? "-" : fixed(mib(p.heap_kib), 1).c_str(), static_cast<long long>(p.fds),
                   static_cast<long long>(p.threads));
    std::fprintf(out, "\n");
  }
}

void print_progress(std::FILE* out, const Sample& s, const std::vector<std::string>& names) {
  std::fprintf(out, "sparcoll-soak: %s %llu, %.1f s, load %.2f:", s.phase == "cycles" ? "cycle" : "op",
               static_cast<unsigned long long>(s.index), s.elapsed_s, s.load1);
  for (std::size_t p = 0; p < names.size() && p < s.procs.size(); ++p)
    std::fprintf(out, " %s %.1f MiB %lld fds %lld thr;", names[p].c_str(), mib(s.procs[p].rss_kib),
                 static_cast<long long>(s.procs[p].fds), static_cast<long long>(s.procs[p].threads));
  std::fprintf(out, "\n");
  std::fflush(out);
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += c;
    else if (static_cast<unsigned char>(c) < 0x20) {
      char buffer[8];
      std::snprintf(buffer, sizeof buffer, "\\u%04x", c);
      out += buffer;
    } else out += c;
  }
  return out + "\"";
}

void write_json(const std::string& path, const std::string& header_fields, const std::vector<Sample>& samples,
                const std::vector<std::string>& names, const std::vector<std::pair<std::string, Verdict>>& verdicts,
                const std::vector<std::string>& verdict_fields) {
  std::ofstream out(path, std::ios::app);
  if (!out) throw std::runtime_error("cannot open " + path + " for writing");
  out << "{\"kind\":\"soak_header\"," << header_fields << "}\n";
  for (const Sample& s : samples)
    for (std::size_t p = 0; p < s.procs.size() && p < names.size(); ++p)
      out << "{\"kind\":\"soak_sample\",\"phase\":" << json_string(s.phase) << ",\"index\":" << s.index
          << ",\"elapsed_s\":" << fixed(s.elapsed_s, 3) << ",\"load1\":" << fixed(s.load1, 2)
          << ",\"process\":" << json_string(names[p]) << ",\"rss_kib\":" << s.procs[p].rss_kib
          << ",\"fds\":" << s.procs[p].fds << ",\"threads\":" << s.procs[p].threads << ",\"maps\":" << s.procs[p].maps
          << ",\"heap_kib\":" << s.procs[p].heap_kib << "}\n";
  for (std::size_t i = 0; i < verdicts.size(); ++i) {
    const Verdict& v = verdicts[i].second;
    out << "{\"kind\":\"soak_verdict\",\"phase\":" << json_string(verdicts[i].first) << ",\"ok\":" << (v.ok ? "true" : "false")
        << ",\"judged\":" << (v.judged ? "true" : "false") << ",\"warm_index\":" << v.warm_index;
    if (i < verdict_fields.size() && !verdict_fields[i].empty()) out << "," << verdict_fields[i];
    out << ",\"failures\":[";
    for (std::size_t k = 0; k < v.failures.size(); ++k) out << (k ? "," : "") << json_string(v.failures[k]);
    out << "]}\n";
  }
  if (!out.flush()) throw std::runtime_error("cannot write " + path);
}

}  // namespace sparcoll::soak
