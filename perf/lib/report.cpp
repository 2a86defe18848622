#include "report.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include "build_info.hpp"

namespace sparcoll::perf {

namespace {

std::size_t dtype_bytes(const std::string& dtype) {
  if (dtype == "f16" || dtype == "bf16") return 2;
  if (dtype == "f32" || dtype == "i32") return 4;
  return 0;
}

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// Whether a CSV file already has the column titles (it may start with "# " header lines).
bool has_csv_titles(const std::string& path) {
  std::ifstream in(path);
  const std::string titles = csv_header();
  for (std::string line; std::getline(in, line);)
    if (line == titles) return true;
  return false;
}

bool append(const std::string& path, const std::string& text, bool csv_titles, std::string* error) {
  const bool titles = csv_titles && !has_csv_titles(path);
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (f == nullptr) {
    *error = "cannot open " + path + ": " + std::strerror(errno);
    return false;
  }
  if (titles) std::fprintf(f, "%s\n", csv_header().c_str());
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok) {
    *error = "cannot write " + path + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::uint64_t ResultRow::bytes() const { return elements * dtype_bytes(dtype); }

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
  std::snprintf(line, sizeof line,
                "# %-8s %-16s %-9s %3s %5s %11s %10s %-5s %-4s %8s %-10s %5s %11s %11s %8s %8s %9s %9s %7s %7s",
                "system", "algo", "transport", "agg", "ranks", "bytes", "elements", "dtype", "op", "density",
                "pattern", "block", "time_us", "p99_us", "algbw", "busbw", "sent_MB", "recv_MB", "speedup", "#wrong");
  return line;
}

std::string table_row(const ResultRow& r) {
  char line[768];
  const std::string speedup = r.speedup > 0 ? fmt("%.2fx", r.speedup) : "-";
  // Peers' byte counts come from the dense algorithm's formula, marked with '~'.
  const char* format = r.bytes_source == "measured" ? "%.3f" : "~%.3f";
  const std::string sent = fmt(format, r.sent_bytes_per_rank / 1e6);
  const std::string recv = fmt(format, r.recv_bytes_per_rank / 1e6);
  std::snprintf(line, sizeof line,
                "  %-8s %-16s %-9s %3d %5d %11llu %10llu %-5s %-4s %8.4f %-10s %5u %11.1f %11.1f %8.3f %8.3f %9s %9s %7s "
                "%7llu",
                r.system.c_str(), r.algo.c_str(), r.transport.c_str(), r.aggregators, r.ranks,
                static_cast<unsigned long long>(r.bytes()), static_cast<unsigned long long>(r.elements),
                r.dtype.c_str(), r.op.c_str(), r.density, r.pattern.c_str(), r.block, r.time_us_median, r.time_us_p99,
                r.algbw_GBps, r.busbw_GBps, sent.c_str(), recv.c_str(), speedup.c_str(),
                static_cast<unsigned long long>(r.wrong));
  return line;
}

std::string to_json(const ResultRow& r) {
  std::string s = "{\"kind\":\"row\"";
  auto str = [&](const char* k, const std::string& v) { s += ",\"" + std::string(k) + "\":\"" + json_escape(v) + "\""; };
  auto num = [&](const char* k, const std::string& v) { s += ",\"" + std::string(k) + "\":" + v; };
  str("system", r.system);
  str("algo", r.algo);
  str("transport", r.transport);
  num("aggregators", std::to_string(r.aggregators));
  num("ranks", std::to_string(r.ranks));
  num("bytes", std::to_string(r.bytes()));
  num("elements", std::to_string(r.elements));
  str("dtype", r.dtype);
  str("op", r.op);
  num("density", fmt("%.6g", r.density));
  str("pattern", r.pattern);
  num("block", std::to_string(r.block));
  num("iters", std::to_string(r.iters));
  num("warmup", std::to_string(r.warmup));
  num("time_us_median", fmt("%.3f", r.time_us_median));
  num("time_us_p99", fmt("%.3f", r.time_us_p99));
  num("algbw_GBps", fmt("%.6f", r.algbw_GBps));
  num("busbw_GBps", fmt("%.6f", r.busbw_GBps));
  num("sent_bytes_per_rank", fmt("%.0f", r.sent_bytes_per_rank));
  num("recv_bytes_per_rank", fmt("%.0f", r.recv_bytes_per_rank));
  num("wire_bytes_per_rank", fmt("%.0f", r.wire_bytes_per_rank));
  str("bytes_source", r.bytes_source);
  num("speedup", r.speedup > 0 ? fmt("%.4f", r.speedup) : "null");
  str("speedup_vs", r.speedup_vs);
  num("wrong", std::to_string(r.wrong));
  str("host", r.host);
  str("commit", r.commit);
  return s + "}";
}

std::string csv_header() {
  return "system,algo,transport,aggregators,ranks,bytes,elements,dtype,op,density,pattern,block,iters,warmup,"
         "time_us_median,time_us_p99,algbw_GBps,busbw_GBps,sent_bytes_per_rank,recv_bytes_per_rank,"
         "wire_bytes_per_rank,bytes_source,speedup,speedup_vs,wrong,host,commit";
}

std::string to_csv(const ResultRow& r) {
  std::string s;
  auto add = [&](const std::string& v) {
    if (!s.empty()) s += ',';
    s += csv_field(v);
  };
  add(r.system);
  add(r.algo);
  add(r.transport);
  add(std::to_string(r.aggregators));
  add(std::to_string(r.ranks));
  add(std::to_string(r.bytes()));
  add(std::to_string(r.elements));
  add(r.dtype);
  add(r.op);
  add(fmt("%.6g", r.density));
  add(r.pattern);
  add(std::to_string(r.block));
  add(std::to_string(r.iters));
  add(std::to_string(r.warmup));
  add(fmt("%.3f", r.time_us_median));
  add(fmt("%.3f", r.time_us_p99));
  add(fmt("%.6f", r.algbw_GBps));
  add(fmt("%.6f", r.busbw_GBps));
  add(fmt("%.0f", r.sent_bytes_per_rank));
  add(fmt("%.0f", r.recv_bytes_per_rank));
  add(fmt("%.0f", r.wire_bytes_per_rank));
  add(r.bytes_source);
  add(r.speedup > 0 ? fmt("%.4f", r.speedup) : "");
  add(r.speedup_vs);
  add(std::to_string(r.wrong));
  add(r.host);
  add(r.commit);
  return s;
}

std::string header_lines(const RunHeader& h) {
  std::string s;
  s += "# " + h.tool + "  commit " + build_commit() + "  host " + host_name() + " (" + cpu_model() + ", " +
       std::to_string(std::thread::hardware_concurrency()) + " cores)\n";
  s += "# transport " + h.transport + "  ranks " + std::to_string(h.ranks) + "  aggregators " +
       std::to_string(h.aggregators) + "\n";
  s += "# options " + h.options + "\n";
  return s;
}

std::string header_json(const RunHeader& h) {
  return "{\"kind\":\"header\",\"tool\":\"" + json_escape(h.tool) + "\",\"commit\":\"" + json_escape(build_commit()) +
         "\",\"host\":\"" + json_escape(host_name()) + "\",\"cpu\":\"" + json_escape(cpu_model()) +
         "\",\"cores\":" + std::to_string(std::thread::hardware_concurrency()) + ",\"transport\":\"" +
         json_escape(h.transport) + "\",\"ranks\":" + std::to_string(h.ranks) +
         ",\"aggregators\":" + std::to_string(h.aggregators) + ",\"options\":\"" + json_escape(h.options) + "\"}";
}

bool append_json(const std::string& path, const ResultRow& row, std::string* error) {
  return append(path, to_json(row) + "\n", false, error);
}

bool append_csv(const std::string& path, const ResultRow& row, std::string* error) {
  return append(path, to_csv(row) + "\n", true, error);
}

bool append_text(const std::string& path, const std::string& text, std::string* error) {
  return append(path, text, false, error);
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) break;
    std::string v = line.substr(colon + 1);
    v.erase(0, v.find_first_not_of(' '));
    return v;
  }
  return "unknown cpu";
}

const char* build_commit() {
  static const std::string commit = [] {
    std::string c = SPARCOLL_PERF_GIT_DESCRIBE;
    return c.empty() ? std::string("unknown") : c;
  }();
  return commit.c_str();
}

std::string json_escape(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

bool parse_flat_json(const std::string& line, std::map<std::string, std::string>* out) {
  std::size_t i = 0;
  auto ws = [&] {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
  };
  auto string = [&](std::string* s) {
    if (i >= line.size() || line[i] != '"') return false;
    ++i;
    s->clear();
    while (i < line.size() && line[i] != '"') {
      char c = line[i++];
      if (c == '\\') {
        if (i >= line.size()) return false;
        const char e = line[i++];
        switch (e) {
          case 'n': c = '\n'; break;
          case 't': c = '\t'; break;
          case 'r': c = '\r'; break;
          case 'b': c = '\b'; break;
          case 'f': c = '\f'; break;
          case 'u':
            if (i + 4 > line.size()) return false;
            c = static_cast<char>(std::strtol(line.substr(i, 4).c_str(), nullptr, 16) & 0x7f);
            i += 4;
            break;
          default: c = e;
        }
      }
      *s += c;
    }
    if (i >= line.size()) return false;
    ++i;
    return true;
  };
  out->clear();
  ws();
  if (i >= line.size() || line[i] != '{') return false;
  ++i;
  ws();
  if (i < line.size() && line[i] == '}') return true;
  while (i < line.size()) {
    std::string key, value;
    ws();
    if (!string(&key)) return false;
    ws();
    if (i >= line.size() || line[i] != ':') return false;
    ++i;
    ws();
    if (i < line.size() && line[i] == '"') {
      if (!string(&value)) return false;
    } else {
      const std::size_t start = i;
      while (i < line.size() && line[i] != ',' && line[i] != '}' && !std::isspace(static_cast<unsigned char>(line[i])))
        ++i;
      value = line.substr(start, i - start);
      if (value.empty() || value[0] == '{' || value[0] == '[') return false;
    }
    (*out)[key] = value;
    ws();
    if (i < line.size() && line[i] == ',') {
      ++i;
      continue;
    }
    if (i < line.size() && line[i] == '}') return true;
    return false;
  }
  return false;
}

bool load_peer_rows(const std::string& path, std::vector<ResultRow>* rows, std::string* error) {
  rows->clear();
  std::ifstream in(path);
  if (!in) return true;
  std::string line;
  std::map<std::string, std::string> f;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (!parse_flat_json(line, &f)) {
      // Other writers' objects (bench-all's header has lists) are not rows; a row must parse.
      if (line.find("\"kind\":\"row\"") == std::string::npos) continue;
      *error = path + ":" + std::to_string(number) + ": a row that is not a flat JSON object";
      return false;
    }
    if (f["kind"] != "row" || f["system"] == "sparcoll" || f["system"].empty()) continue;
    ResultRow r;
    r.system = f["system"];
    r.algo = f["algo"];
    r.transport = f["transport"];
    r.ranks = std::atoi(f["ranks"].c_str());
    r.elements = std::strtoull(f["elements"].c_str(), nullptr, 10);
    r.dtype = f["dtype"];
    r.op = f["op"];
    r.density = std::atof(f["density"].c_str());
    r.pattern = f["pattern"];
    r.block = static_cast<std::uint32_t>(std::strtoul(f["block"].c_str(), nullptr, 10));
    r.time_us_median = std::atof(f["time_us_median"].c_str());
    r.wrong = std::strtoull(f["wrong"].c_str(), nullptr, 10);
    rows->push_back(r);
  }
  return true;
}

void apply_speedup(const std::vector<ResultRow>& peers, ResultRow* row) {
  const ResultRow* best = nullptr;
  for (const ResultRow& p : peers) {
    if (p.ranks != row->ranks || p.elements != row->elements || p.dtype != row->dtype || p.op != row->op ||
        p.pattern != row->pattern || p.transport != row->transport || p.time_us_median <= 0 || p.wrong != 0)
      continue;
    if (std::fabs(p.density - row->density) > 1e-4 * std::max(1e-6, row->density)) continue;
    // Block size shapes only the synthetic data's layout; a trace has its own.
    if (p.block != row->block && row->pattern.rfind("trace:", 0) != 0) continue;
    if (best == nullptr || p.time_us_median < best->time_us_median) best = &p;
  }
  if (best == nullptr || row->time_us_median <= 0) return;
  row->speedup = best->time_us_median / row->time_us_median;
  row->speedup_vs = best->system + "/" + best->algo;
}

}  // namespace sparcoll::perf
