// scripts/bench-all --quick end to end: every system of the comparison either has result rows
// with no wrong element or an explicit "missing" line; a peer that fails makes a "failed" line
// and a non-zero exit. CI does not judge speed, only that the suite keeps working.
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../integration/launch_util.hpp"

namespace {

using sparcoll::testing::LaunchResult;
using sparcoll::testing::run_program;
using sparcoll::testing::source_path;

bool on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  std::string dirs = path;
  std::size_t start = 0;
  while (start <= dirs.size()) {
    const std::size_t end = dirs.find(':', start);
    const std::string dir = dirs.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!dir.empty() && access((dir + "/" + name).c_str(), X_OK) == 0) return true;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return false;
}

std::string temp_dir() {
  char pattern[] = "/tmp/sparcoll-bench-all-XXXXXX";
  const char* dir = mkdtemp(pattern);
  return dir == nullptr ? std::string() : std::string(dir);
}

// A flat JSON object's field as written: "key":"value" or "key":value.
std::string field(const std::string& line, const std::string& key) {
  const std::string tag = "\"" + key + "\":";
  const auto at = line.find(tag);
  if (at == std::string::npos) return "";
  std::size_t start = at + tag.size();
  if (start < line.size() && line[start] == '"') {
    const auto end = line.find('"', start + 1);
    return line.substr(start + 1, end - start - 1);
  }
  const auto end = line.find_first_of(",}", start);
  return line.substr(start, end - start);
}

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(BenchAll, QuickRunCoversEverySystem) {
  if (!on_path("mpirun")) GTEST_SKIP() << "mpirun is not installed (apt-get install openmpi-bin): bench-all needs it";
  const std::string out = temp_dir();
  ASSERT_FALSE(out.empty());
  // An empty trace cache, as on a fresh clone: the traces listed but not stored must be reported.
  const LaunchResult r = run_program({source_path("scripts/bench-all"), "--quick", "--no-plots", "--out", out,
                                      "--build-dir", SPARCOLL_BUILD_DIR},
                                     {"SPARCOLL_TRACE_CACHE=" + out + "/empty-trace-cache"}, std::chrono::seconds(400));
  EXPECT_EQ(r.exit_code, 0) << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
  EXPECT_LT(r.seconds, 300.0) << "bench-all --quick should take well under 2 minutes on an idle machine";

  // system/algo/transport/dedicated -> rows, wrong; and the missing ones.
  std::map<std::string, std::pair<int, long long>> rows;
  std::set<std::string> missing;
  int kernels = 0, failed = 0;
  for (const std::string& line : lines_of(out + "/results.jsonl")) {
    const std::string kind = field(line, "kind");
    // sparcoll's default is auto, whose rows name what it ran ("auto:hybrid"): one key for all.
    const std::string algo = field(line, "algo").substr(0, field(line, "algo").find(':'));
    const std::string key = field(line, "system") + "/" + algo + "/" + field(line, "transport") +
                            (field(line, "aggregators") != "" && field(line, "aggregators") != "0" ? "/dedicated" : "");
    if (kind == "row") {
      rows[key].first += 1;
      rows[key].second += std::stoll(field(line, "wrong"));
    } else if (kind == "missing") {
      missing.insert(field(line, "system") + "/" + field(line, "algo") + "/" + field(line, "transport"));
    } else if (kind == "kernel") {
      ++kernels;
    } else if (kind == "failed") {
      ++failed;
      ADD_FAILURE() << "failed: " << line;
    }
  }
  EXPECT_EQ(failed, 0);
  const std::vector<std::string> expected = {
      "sparcoll/auto/shm",   "sparcoll/auto/shm/dedicated", "sparcoll/auto/tcp", "sparcoll/auto/tcp/dedicated",
      "mpi/default/shm",     "mpi/default/tcp",             "gloo/ring/tcp",     "gloo/halving_doubling/tcp",
      "floor/read/shm"};
  for (const std::string& system : expected) {
    const std::string base = system.substr(0, system.rfind("/dedicated") == std::string::npos ? std::string::npos
                                                                                             : system.rfind("/dedicated"));
    if (missing.count(base)) {
      EXPECT_EQ(system.rfind("sparcoll", 0), std::string::npos) << "sparcoll itself may not be missing: " << system;
      continue;
    }
    ASSERT_TRUE(rows.count(system)) << "no rows and no missing line for " << system << "\n" << r.out;
    EXPECT_GE(rows[system].first, system.rfind("floor", 0) == 0 ? 1 : 9) << system;  // 3 sizes x 3 densities
    EXPECT_EQ(rows[system].second, 0) << system << " has wrong elements";
  }
  EXPECT_GT(kernels, 0) << "no kernel figures";
  // A trace in perf/data is replayed by every system, or reported missing.
  bool have_trace = false;
  for (const auto& e : std::filesystem::directory_iterator(source_path("perf/data"), std::filesystem::directory_options::skip_permission_denied))
    have_trace = have_trace || e.path().extension() == ".sgtrace";
  if (have_trace && !missing.count("trace/-/-")) {
    int trace_rows = 0;
    for (const std::string& line : lines_of(out + "/results.jsonl"))
      if (field(line, "kind") == "row" && field(line, "pattern").rfind("trace:", 0) == 0) {
        ++trace_rows;
        EXPECT_EQ(field(line, "wrong"), "0") << line;
      }
    EXPECT_GT(trace_rows, 0) << "perf/data has a trace but no trace rows were written";
  }
  // A trace listed in traces.sha256 but in neither perf/data nor the cache (the transformer's, too
  // large to store) is reported missing, so that a summary with fewer trace points says why.
  if (!std::filesystem::exists(source_path("perf/data/transformer-lm.sgtrace")))
    EXPECT_TRUE(missing.count("trace/transformer-lm.sgtrace/-")) << "the unstored transformer trace is not reported missing";
  // CSV: header comments, the column titles once, then one line per row.
  int titles = 0, csv_rows = 0;
  for (const std::string& line : lines_of(out + "/results.csv")) {
    if (line.rfind("system,algo,transport,", 0) == 0) ++titles;
    else if (!line.empty() && line[0] != '#') ++csv_rows;
  }
  EXPECT_EQ(titles, 1);
  int json_rows = 0;
  for (const auto& [key, counts] : rows) json_rows += counts.first;
  EXPECT_EQ(csv_rows, json_rows);
  EXPECT_TRUE(std::filesystem::exists(out + "/summary.txt"));
  // The never-slower summary: one line per point with a verdict, and the count.
  bool never_slower = false;
  for (const std::string& line : lines_of(out + "/summary.txt"))
    never_slower = never_slower || (line.rfind("# never slower: ", 0) == 0 && line.find(" points: ") != std::string::npos);
  EXPECT_TRUE(never_slower) << "summary.txt has no never-slower count";
  // The algorithms: every program's rows between markers that give its round, and the count of
  // points where auto's pick is within 10% of the best.
  int round_markers = 0;
  for (const std::string& line : lines_of(out + "/results.jsonl")) round_markers += field(line, "kind") == "algorithm_round";
  EXPECT_GT(round_markers, 0) << "results.jsonl has no algorithm_round markers";
  bool algorithms = false;
  for (const std::string& line : lines_of(out + "/summary.txt"))
    algorithms = algorithms || line.rfind("# algorithms: auto's pick within 10% of the best at ", 0) == 0;
  EXPECT_TRUE(algorithms) << "summary.txt has no count of auto's picks";
  bool decision = false;
  for (const std::string& line : lines_of(out + "/summary.txt"))
    decision = decision || line.rfind("# algorithms: what auto's decision costs: ", 0) == 0;
  EXPECT_TRUE(decision) << "summary.txt does not say what auto's decision costs";
  // Every program's rows follow the core-to-core round trip measured just before it.
  int core_latency = 0;
  for (const std::string& line : lines_of(out + "/results.jsonl"))
    core_latency += field(line, "kind") == "core_latency" && !field(line, "round_trip_ns").empty() ? 1 : 0;
  EXPECT_GT(core_latency, 0) << "results.jsonl has no core_latency records";
  bool core_line = false;
  for (const std::string& line : lines_of(out + "/summary.txt"))
    core_line = core_line || line.rfind("# cache-line round trip between cores before each of ", 0) == 0;
  EXPECT_TRUE(core_line) << "summary.txt does not say how far apart the host had put the cores";
  bool load_line = false;
  for (const std::string& line : lines_of(out + "/summary.txt"))
    load_line = load_line || (line.rfind("# host: load average ", 0) == 0 && line.find("% of the CPU time") != std::string::npos);
  EXPECT_TRUE(load_line) << "summary.txt does not give the host's load average and steal";
  EXPECT_TRUE(std::filesystem::exists(out + "/never-slower.jsonl"));
  // A trace's point is shown and drawn at the trace's own density, not at 0.
  for (const std::string& line : lines_of(out + "/never-slower.jsonl"))
    if (field(line, "pattern").rfind("trace:", 0) == 0)
      EXPECT_GT(std::stod(field(line, "density")), 0.0) << "a trace's never-slower point has no density: " << line;
  std::filesystem::remove_all(out);
}

// A build tree whose sparcoll-perf is a stand-in with fixed times (the real one's are noise here):
// auto picks hybrid, hybrid takes 1.3 ms in the first run against block-sparse's 1.0, and
// `again_us` when bench-all measures the two again. sparcoll-run starts the program once.
std::string fake_algorithm_build(const std::string& dir, int again_us) {
  std::filesystem::create_directories(dir + "/perf");
  std::filesystem::create_directories(dir + "/src/tools");
  {
    std::ofstream f(dir + "/src/tools/sparcoll-run");
    f << "#!/usr/bin/python3\nimport os, sys\nargs = sys.argv[1:]\nprog = args[args.index('--') + 1:]\n"
         "os.environ['SPARCOLL_TRANSPORT'] = args[args.index('--transport') + 1]\nos.execv(prog[0], prog)\n";
  }
  {
    std::ofstream f(dir + "/perf/sparcoll-perf");
    f << "#!/usr/bin/python3\nimport json, os, sys\na = sys.argv[1:]\nopt = lambda k: a[a.index(k) + 1]\n"
         "algos = opt('--algo').split(',')\nagain = len(algos) == 2\n"
         "times = {'hybrid': " << again_us << " if again else 1300, 'block_sparse': 1000, 'ring': 2000}\n"
         "with open(opt('--json'), 'a') as out:\n"
         "    for algo in algos:\n"
         "        name = 'auto:hybrid' if algo == 'auto' else algo\n"
         "        t = times.get('hybrid' if algo == 'auto' else algo, 5000)\n"
         "        out.write(json.dumps(dict(kind='row', system='sparcoll', algo=name, ranks=2,\n"
         "                                  transport=os.environ['SPARCOLL_TRANSPORT'],\n"
         "                                  aggregators=0, elements=8192, bytes=32768, dtype='f32', op='sum',\n"
         "                                  density=float(opt('--density')), pattern='random',\n"
         "                                  time_us_median=t, time_us_p99=t, wrong=0), separators=(',', ':')) + '\\n')\n";
  }
  for (const char* tool : {"/src/tools/sparcoll-run", "/perf/sparcoll-perf"})
    std::filesystem::permissions(dir + tool, std::filesystem::perms::owner_all);
  return dir;
}

// Runs bench-all's algorithm section on the stand-in; returns summary.txt's lines.
std::vector<std::string> algorithm_summary_with_repeat(const std::string& out, int again_us) {
  const std::string build = fake_algorithm_build(out + "/build", again_us);
  const LaunchResult r = run_program({source_path("scripts/bench-all"), "--quick", "--no-plots", "--systems",
                                      "algorithms", "--out", out + "/results", "--build-dir", build},
                                     {}, std::chrono::seconds(120));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  return lines_of(out + "/results/summary.txt");
}

bool has_line(const std::vector<std::string>& lines, const std::string& prefix, const std::string& part) {
  for (const std::string& line : lines)
    if (line.rfind(prefix, 0) == 0 && line.find(part) != std::string::npos) return true;
  return false;
}

TEST(BenchAll, APickThatMissesTheBestIsMeasuredAgainAndNoiseIsToldFromAMiss) {
  const std::string out = temp_dir();
  ASSERT_FALSE(out.empty());
  // Within 10% when measured again: noise, and it counts.
  std::vector<std::string> lines = algorithm_summary_with_repeat(out + "/noise", 1050);
  EXPECT_TRUE(has_line(lines, "      2 shm         0.0100", "1.30 NO")) << "the first run's miss is shown";
  EXPECT_TRUE(has_line(lines, "      2 shm         0.0100", "1.05 noise"));
  EXPECT_TRUE(has_line(lines, "# algorithms: auto's pick within 10% of the best at 0 of 4 points in the first run; ",
                       "4 more within 10% when measured again, so 4 of 4; 0 above 1.10 in both runs"));
  int repeated_rows = 0;
  for (const std::string& line : lines_of(out + "/noise/results/algorithm-repeat.jsonl"))
    repeated_rows += field(line, "kind") == "row";
  EXPECT_EQ(repeated_rows, 4 * 2 * 2) << "4 points x 2 rounds x the pick and the best";
  // Still above 1.10: a miss in both runs, which does not count.
  lines = algorithm_summary_with_repeat(out + "/miss", 1250);
  EXPECT_TRUE(has_line(lines, "      2 tcp         1.0000", "1.25 NO"));
  EXPECT_TRUE(has_line(lines, "# algorithms: auto's pick within 10% of the best at 0 of 4 points in the first run; ",
                       "0 more within 10% when measured again, so 0 of 4; 4 above 1.10 in both runs"));
  std::filesystem::remove_all(out);
}

// A build tree for the never-slower repeat: sparcoll-perf takes 1 ms at 4 KiB dense over tcp
// (0.1 ms elsewhere); the Gloo stand-in takes 0.5 ms on the close placement and 3 ms on the far
// one; sparcoll-core-latency reports the far placement (400 ns) on the calls listed in `far` and
// the close one (100 ns) on the others. bench-all's calls with --systems sparcoll,gloo --ranks 2:
// 0-3 before the first run's programs (gloo ring and halving-doubling, sparcoll over shm and tcp),
// then per round of the one point measured again (4 KiB dense over tcp, 0.50 in the first run):
// before sparcoll's program, before Gloo's two, and after the round (4-7, 8-11, ...).
std::string fake_placement_build(const std::string& dir, const std::string& far) {
  std::filesystem::create_directories(dir + "/perf");
  std::filesystem::create_directories(dir + "/src/tools");
  {
    std::ofstream f(dir + "/src/tools/sparcoll-run");
    f << "#!/usr/bin/python3\nimport os, sys\nargs = sys.argv[1:]\nprog = args[args.index('--') + 1:]\n"
         "if '--transport' in args:\n    os.environ['SPARCOLL_TRANSPORT'] = args[args.index('--transport') + 1]\n"
         "os.execv(prog[0], prog)\n";
  }
  {
    std::ofstream f(dir + "/perf/sparcoll-core-latency");
    f << "#!/usr/bin/python3\nimport json, os, sys\nhere = os.path.dirname(os.path.abspath(sys.argv[0]))\n"
         "calls = os.path.join(here, 'calls')\nn = int(open(calls).read()) if os.path.exists(calls) else 0\n"
         "open(calls, 'w').write(str(n + 1))\nns = 400.0 if n in {" << far << "} else 100.0\n"
         "open(os.path.join(here, 'placement'), 'w').write(str(ns))\nprint(json.dumps(dict(round_trip_ns=ns)))\n";
  }
  // The row of one system at every density asked for; `time` is a Python expression.
  const auto perf_program = [&](const std::string& name, const std::string& system, const std::string& time) {
    std::ofstream f(dir + "/perf/" + name);
    f << "#!/usr/bin/python3\nimport json, os, sys\na = sys.argv[1:]\nopt = lambda k: a[a.index(k) + 1]\n"
         "here = os.path.dirname(os.path.abspath(sys.argv[0]))\n"
         "far = float(open(os.path.join(here, 'placement')).read()) > 250\n"
         "transport = os.environ.get('SPARCOLL_TRANSPORT', 'tcp')\n"
         "with open(opt('--json'), 'a') as out:\n"
         "    for density in [float(d) for d in opt('--density').split(',')]:\n"
         "        t = " << time << "\n"
         "        out.write(json.dumps(dict(kind='row', system='" << system << "',\n"
         "            algo=opt('--algo') if '--algo' in a else 'auto:hybrid', ranks=2, transport=transport,\n"
         "            aggregators=0, elements=1024, bytes=4096, dtype='f32', op='sum', density=density,\n"
         "            pattern='random', block=256, time_us_median=t, time_us_p99=t, algbw_GBps=1.0, busbw_GBps=1.0,\n"
         "            sent_bytes_per_rank=4096, recv_bytes_per_rank=4096, wrong=0), separators=(',', ':')) + '\\n')\n";
  };
  perf_program("sparcoll-perf", "sparcoll", "1000.0 if transport == 'tcp' and density == 1.0 else 100.0");
  perf_program("sparcoll-perf-gloo", "gloo", "3000.0 if far else 500.0");
  for (const char* tool : {"/src/tools/sparcoll-run", "/perf/sparcoll-core-latency", "/perf/sparcoll-perf",
                           "/perf/sparcoll-perf-gloo"})
    std::filesystem::permissions(dir + tool, std::filesystem::perms::owner_all);
  return dir;
}

// Runs bench-all's never-slower comparison on the stand-ins; returns the 4 KiB dense tcp point's
// record in never-slower.jsonl.
std::string never_slower_record_with_far_calls(const std::string& out, const std::string& far) {
  const std::string build = fake_placement_build(out + "/build", far);
  const LaunchResult r = run_program({source_path("scripts/bench-all"), "--quick", "--no-plots", "--no-dedicated",
                                      "--systems", "sparcoll,gloo", "--ranks", "2", "--out", out + "/results",
                                      "--build-dir", build},
                                     {}, std::chrono::seconds(120));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const std::string& line : lines_of(out + "/results/never-slower.jsonl"))
    if (field(line, "transport") == "tcp" && field(line, "density") == "1.0") return line;
  ADD_FAILURE() << "no never-slower record of 4 KiB dense over tcp";
  return "";
}

TEST(BenchAll, ARepeatRoundDuringWhichTheHostMovedTheCpusIsMeasuredAgain) {
  const std::string out = temp_dir();
  ASSERT_FALSE(out.empty());
  // The first round's Gloo programs run on the far placement (3 ms, a ratio of 3.00): that round
  // is measured again, and the second, all on the close one (0.50), is the one kept.
  std::string record = never_slower_record_with_far_calls(out + "/moved-once", "5, 6, 7");
  EXPECT_EQ(field(record, "ratio"), "0.5") << record;
  EXPECT_EQ(field(record, "ratio_again"), "0.5") << record;
  EXPECT_EQ(field(record, "rounds_moved"), "1") << record;
  EXPECT_EQ(field(record, "verdict"), "SLOWER") << record;
  EXPECT_TRUE(has_line(lines_of(out + "/moved-once/results/summary.txt"), "      2 tcp ", "SLOWER (1 round(s) moved)"));
  // Every round moved (at most twice the rounds are measured): they are kept, and the line says so.
  record = never_slower_record_with_far_calls(out + "/moved-always", "5, 6, 7, 9, 10, 11");
  EXPECT_EQ(field(record, "ratio_again"), "3.0") << record;
  EXPECT_EQ(field(record, "rounds_moved"), "2") << record;
  EXPECT_EQ(field(record, "verdict"), "noise") << record;
  EXPECT_TRUE(has_line(lines_of(out + "/moved-always/results/summary.txt"), "      2 tcp ",
                       "noise (2 round(s) moved, kept: every round moved)"));
  // No move: the one round is kept as before.
  record = never_slower_record_with_far_calls(out + "/still", "");
  EXPECT_EQ(field(record, "ratio_again"), "0.5") << record;
  EXPECT_EQ(field(record, "rounds_moved"), "0") << record;
  std::filesystem::remove_all(out);
}

TEST(BenchAll, AFailingPeerIsReportedAndFailsTheRun) {
  const std::string out = temp_dir();
  ASSERT_FALSE(out.empty());
  const std::string fake = out + "/broken-peer";
  {
    std::ofstream f(fake);
    f << "#!/bin/sh\necho 'broken-peer: cannot reduce today' >&2\nexit 3\n";
  }
  std::filesystem::permissions(fake, std::filesystem::perms::owner_all);
  const LaunchResult r = run_program({source_path("scripts/bench-all"), "--quick", "--no-plots", "--systems", "gloo",
                                      "--gloo-bin", fake, "--out", out + "/results", "--build-dir", SPARCOLL_BUILD_DIR},
                                     {}, std::chrono::seconds(120));
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("FAILED: gloo ring"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("cannot reduce today"), std::string::npos) << r.err;
  int failed = 0;
  for (const std::string& line : lines_of(out + "/results/results.jsonl"))
    if (field(line, "kind") == "failed") ++failed;
  EXPECT_EQ(failed, 2) << "ring and halving_doubling";
  std::filesystem::remove_all(out);
}

TEST(BenchAll, AMissingPeerIsALineNotASilence) {
  const std::string out = temp_dir();
  ASSERT_FALSE(out.empty());
  const LaunchResult r = run_program({source_path("scripts/bench-all"), "--quick", "--no-plots", "--systems", "gloo",
                                      "--gloo-bin", out + "/not-built", "--out", out + "/results", "--build-dir",
                                      SPARCOLL_BUILD_DIR},
                                     {}, std::chrono::seconds(120));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("MISSING"), std::string::npos) << r.out;
  int missing = 0;
  for (const std::string& line : lines_of(out + "/results/results.jsonl"))
    if (field(line, "kind") == "missing" && field(line, "system") == "gloo") ++missing;
  EXPECT_EQ(missing, 2);
  std::filesystem::remove_all(out);
}

}  // namespace
