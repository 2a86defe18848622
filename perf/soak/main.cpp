// sparcoll-soak: thousands of mixed collectives (every kind, algorithm, dtype and op, sizes from
// 0 to 16 MiB, non-blocking ones in flight together, bad calls the library must reject), every
// result checked, while every process's RSS, descriptors and threads are sampled; then optionally
// communicators created and destroyed in a loop. Fails when a result is wrong, when results differ
// between ranks, or when RSS grows past the limit or descriptors or threads change after warm-up.
//
//   sparcoll-run -n 2 --transport shm -- sparcoll-soak --ops 20000 --cycles 1000 --json soak.jsonl
//   sparcoll-run -n 4 --aggregators 1 --transport tcp -- sparcoll-soak --ops 20000
//
// Rank 0 prints a table of the samples, one verdict line per failure, and a last line starting
// "sparcoll-soak: ok:" or "sparcoll-soak: FAIL:". Exit code 0, 1 (leak, wrong result, error), 2
// (bad flags). See docs/perf.md, "Soak".
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "cycles.hpp"
#include "flags.hpp"
#include "proc_stats.hpp"
#include "report.hpp"
#include "runner.hpp"
#include "samples.hpp"
#include "sparcoll/sparcoll.hpp"

namespace {

using namespace sparcoll::soak;
using Clock = std::chrono::steady_clock;

// Takes samples on every rank at the same op index; rank 0 keeps them, with its aggregators'.
class Sampler {
 public:
  Sampler(sparcoll::Communicator& comm, Clock::time_point start) : comm_(comm), start_(start) {
    for (int r = 0; r < comm.size(); ++r) names_.push_back("rank " + std::to_string(r));
    if (comm.rank() == 0 && comm.options().aggregators > 0) {
      aggregators_ = find_sibling_aggregators();
      if (static_cast<int>(aggregators_.size()) != comm.options().aggregators)
        std::fprintf(stderr, "sparcoll-soak: found %zu of %d aggregator processes among this rank's siblings; "
                     "only those are sampled\n", aggregators_.size(), comm.options().aggregators);
      for (const Sibling& a : aggregators_) names_.push_back("agg " + std::to_string(a.index));
    }
  }

  // Every rank: its figures and its results hash go to every rank; "" or why the hashes differ.
  std::string take(const std::string& phase, std::uint64_t index, std::uint64_t hash, bool progress) {
    const ProcStats me = read_self();
    constexpr int kFields = 7;
    std::int32_t mine[kFields] = {static_cast<std::int32_t>(me.rss_kib), static_cast<std::int32_t>(me.fds),
                                  static_cast<std::int32_t>(me.threads), static_cast<std::int32_t>(me.maps),
                                  static_cast<std::int32_t>(me.heap_kib),
                                  static_cast<std::int32_t>(hash & 0xffffffffu), static_cast<std::int32_t>(hash >> 32)};
    std::vector<std::int32_t> all(static_cast<std::size_t>(kFields * comm_.size()));
    comm_.allgather(mine, all.data(), kFields, sparcoll::DataType::i32);
    Sample s;
    s.phase = phase;
    s.index = index;
    s.elapsed_s = std::chrono::duration<double>(Clock::now() - start_).count();
    s.load1 = load_average_1min();
    std::string differ;
    for (int r = 0; r < comm_.size(); ++r) {
      const std::int32_t* f = &all[static_cast<std::size_t>(r * kFields)];
      s.procs.push_back({f[0], f[1], f[2], f[3], f[4]});
      if ((f[5] != all[5] || f[6] != all[6]) && differ.empty())
        differ = "results differ between rank 0 and rank " + std::to_string(r) + " (hashes of every result up to " +
                 phase + " " + std::to_string(index) + ", since " + phase + " " + std::to_string(last_index_) + ")";
    }
    last_index_ = index;
    if (comm_.rank() != 0) return differ;
    for (const Sibling& a : aggregators_) s.procs.push_back(read_process(a.pid));
    if (progress) print_progress(stdout, s, names_);
    samples_.push_back(std::move(s));
    return differ;
  }

  const std::vector<Sample>& samples() const { return samples_; }
  const std::vector<std::string>& names() const { return names_; }
  std::size_t aggregators() const { return aggregators_.size(); }

 private:
  sparcoll::Communicator& comm_;
  Clock::time_point start_;
  std::vector<std::string> names_;
  std::vector<Sibling> aggregators_;
  std::vector<Sample> samples_;
  std::uint64_t last_index_ = 0;
};

double mib(std::int64_t kib) { return static_cast<double>(kib) / 1024.0; }

// "+0.3 MiB (rank 1, 45.0 -> 45.3 MiB), heap +0.0 MiB": the process whose RSS grew most after
// warm-up, and the largest growth of malloc's bytes in use.
std::string largest_growth(const Verdict& v) {
  const Figures* worst = nullptr;
  std::int64_t heap = 0;
  for (const Figures& f : v.figures) {
    if (worst == nullptr || f.end.rss_kib - f.warm.rss_kib > worst->end.rss_kib - worst->warm.rss_kib) worst = &f;
    if (f.warm.heap_kib >= 0 && f.end.heap_kib >= 0) heap = std::max(heap, f.end.heap_kib - f.warm.heap_kib);
  }
  if (worst == nullptr) return "none";
  char buffer[200];
  std::snprintf(buffer, sizeof buffer, "%+.1f MiB (%s, %.1f -> %.1f MiB), heap %+.1f MiB",
                mib(worst->end.rss_kib - worst->warm.rss_kib), worst->name.c_str(), mib(worst->warm.rss_kib),
                mib(worst->end.rss_kib), mib(heap));
  return buffer;
}

// The figures of a phase for the JSON verdict line.
std::string verdict_fields(const Verdict& v, double seconds) {
  std::string s = "\"duration_s\":" + std::to_string(seconds) + ",\"processes\":[";
  for (std::size_t i = 0; i < v.figures.size(); ++i) {
    const Figures& f = v.figures[i];
    s += std::string(i ? "," : "") + "{\"process\":" + json_string(f.name) +
         ",\"rss_kib\":[" + std::to_string(f.start.rss_kib) + "," + std::to_string(f.warm.rss_kib) + "," +
         std::to_string(f.end.rss_kib) + "],\"rss_peak_kib\":" + std::to_string(f.rss_peak_kib) + ",\"fds\":[" +
         std::to_string(f.start.fds) + "," + std::to_string(f.warm.fds) + "," + std::to_string(f.end.fds) +
         "],\"threads\":[" + std::to_string(f.start.threads) + "," + std::to_string(f.warm.threads) + "," +
         std::to_string(f.end.threads) + "]}";
  }
  return s + "]";
}

int run(const Flags& flags, int argc, char** argv) {
  sparcoll::Communicator comm = sparcoll::Communicator::from_env();
  const int rank = comm.rank(), world = comm.size();
  const int aggregators = comm.options().aggregators;
  if (flags.cycles > 0 && aggregators > 0) {
    if (rank == 0)
      std::fprintf(stderr, "sparcoll-soak: --cycles needs co-located aggregation: a dedicated aggregator serves one "
                           "communicator (SPARCOLL_AGGREGATORS=%d)\n", aggregators);
    return 2;
  }
  const auto start = Clock::now();
  const CpuTimes cpu_start = read_cpu_times();
  const double load_start = load_average_1min();
  Runner runner(comm, flags.max_bytes, flags.max_batch);
  MixOptions mo;
  mo.world = world;
  mo.max_bytes = flags.max_bytes;
  mo.kinds = flags.kinds;
  mo.max_batch = flags.max_batch;
  mo.seed = flags.seed;
  mo.tensors = runner.tensors();
  mo.faults = runner.faults();
  Mix mix(mo);
  Sampler sampler(comm, start);
  // The other ranks are still in the mix, so this one leaves at once rather than through the
  // communicator's destructor; sparcoll-run then stops the job.
  auto fail = [&](const std::string& what) {
    std::fprintf(stderr, "sparcoll-soak: FAIL: rank %d: %s\n", rank, what.c_str());
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(1);
    return 1;
  };

  // The mixed collectives.
  std::string differ = sampler.take("ops", 0, runner.hash(), flags.progress);
  std::uint64_t done = 0, steps = 0, next_sample = flags.sample_every;
  while (done < flags.ops) {
    Step step = mix.next();
    if (step.calls.size() > flags.ops - done) step.calls.resize(flags.ops - done);
    const bool check = steps++ % flags.check_every == 0;
    if (flags.log_calls && rank == 0)
      for (std::size_t i = 0; i < step.calls.size(); ++i)
        std::printf("sparcoll-soak: op %llu: %s\n", static_cast<unsigned long long>(done + i), step.calls[i].describe().c_str());
    const std::string wrong = runner.run(step, check);
    if (!wrong.empty()) return fail("op " + std::to_string(done) + ": " + wrong);
    done += step.calls.size();
    if (done >= next_sample || done == flags.ops) {
      differ = sampler.take("ops", done, runner.hash(), flags.progress);
      if (!differ.empty()) return fail(differ);
      while (next_sample <= done) next_sample += flags.sample_every;
    }
  }
  const double ops_seconds = std::chrono::duration<double>(Clock::now() - start).count();

  // Communicators created and destroyed beside the first one.
  double cycles_seconds = 0;
  if (flags.cycles > 0) {
    const auto cycles_start = Clock::now();
    sampler.take("cycles", 0, runner.hash(), flags.progress);
    const std::uint64_t every = std::max<std::uint64_t>(1, flags.cycles / 20);
    for (std::uint64_t c = 1; c <= flags.cycles; ++c) {
      const std::string wrong = run_cycle(comm.options(), c);
      if (!wrong.empty()) return fail("cycle " + std::to_string(c) + ": " + wrong);
      if (c % every == 0 || c == flags.cycles) sampler.take("cycles", c, runner.hash(), flags.progress);
    }
    cycles_seconds = std::chrono::duration<double>(Clock::now() - cycles_start).count();
  }
  const CpuTimes cpu_end = read_cpu_times();
  const double load_end = load_average_1min();

  // Rank 0 judges (it alone has the aggregators' samples) and tells the others.
  std::int32_t ok = 1;
  if (rank == 0) {
    const std::vector<std::string>& names = sampler.names();
    const auto warm_ops = static_cast<std::uint64_t>(flags.warmup * static_cast<double>(flags.ops) + 0.5);
    const auto warm_cycles = static_cast<std::uint64_t>(flags.warmup * static_cast<double>(flags.cycles) + 0.5);
    std::vector<std::pair<std::string, Verdict>> verdicts = {
        {"ops", judge(sampler.samples(), "ops", warm_ops, names, flags.limits)}};
    if (flags.cycles > 0) verdicts.push_back({"cycles", judge(sampler.samples(), "cycles", warm_cycles, names, flags.limits)});
    const std::string transport = comm.transport_name();
    const std::string layout = aggregators == 0 ? "co-located" : std::to_string(aggregators) + " aggregator" + (aggregators > 1 ? "s" : "");
    const double steal = steal_percent(cpu_start, cpu_end);
    std::printf("sparcoll-soak: %llu ops on %d ranks over %s (%s), seed %llu, max %zu bytes, commit %s\n",
                static_cast<unsigned long long>(flags.ops), world, transport.c_str(), layout.c_str(),
                static_cast<unsigned long long>(flags.seed), flags.max_bytes, sparcoll::perf::build_commit());
    if (!flags.limits.judge_rss)
      std::printf("sparcoll-soak: rss is shown, not judged: an AddressSanitizer build's rss holds its quarantine and "
                  "fake stacks (LeakSanitizer checks for leaks at exit)\n");
    for (const auto& [phase, v] : verdicts) {
      print_table(stdout, sampler.samples(), phase, names);
      for (const std::string& f : v.failures) std::printf("sparcoll-soak: %s: %s\n", phase.c_str(), f.c_str());
      if (!v.judged)
        std::printf("sparcoll-soak: %s: no sample after warm-up to compare with (more %s or a smaller --sample-every)\n",
                    phase.c_str(), phase.c_str());
      ok = ok && v.ok && v.judged;
    }
    std::string line = std::string(ok ? "ok" : "FAIL") + ": " + transport + " " + std::to_string(world) + " ranks " + layout +
                       ": " + std::to_string(flags.ops) + " ops in " + std::to_string(static_cast<int>(ops_seconds + 0.5)) +
                       " s, rss after warm-up " + largest_growth(verdicts[0].second);
    if (flags.cycles > 0)
      line += "; " + std::to_string(flags.cycles) + " cycles in " + std::to_string(static_cast<int>(cycles_seconds + 0.5)) +
              " s, rss " + largest_growth(verdicts[1].second);
    bool flat = true;
    for (const auto& [phase, v] : verdicts)
      for (const std::string& f : v.failures) flat = flat && f.find("not flat") == std::string::npos;
    char tail[128];
    std::snprintf(tail, sizeof tail, "; fds and threads %s; load %.2f -> %.2f, steal %.1f%%", flat ? "flat" : "NOT flat",
                  load_start, load_end, steal);
    std::printf("sparcoll-soak: %s%s\n", line.c_str(), tail);
    std::fflush(stdout);
    if (!flags.json.empty()) {
      std::string options;
      for (int i = 1; i < argc; ++i) options += std::string(i > 1 ? " " : "") + argv[i];
      const std::string header =
          "\"tool\":\"sparcoll-soak\",\"host\":" + json_string(sparcoll::perf::host_name()) +
          ",\"commit\":" + json_string(sparcoll::perf::build_commit()) + ",\"transport\":" + json_string(transport) +
          ",\"ranks\":" + std::to_string(world) + ",\"aggregators\":" + std::to_string(aggregators) +
          ",\"ops\":" + std::to_string(flags.ops) + ",\"cycles\":" + std::to_string(flags.cycles) +
          ",\"seed\":" + std::to_string(flags.seed) + ",\"load1_start\":" + std::to_string(load_start) +
          ",\"load1_end\":" + std::to_string(load_end) + ",\"steal_percent\":" + std::to_string(steal) +
          ",\"options\":" + json_string(options);
      std::vector<std::string> fields = {verdict_fields(verdicts[0].second, ops_seconds)};
      if (flags.cycles > 0) fields.push_back(verdict_fields(verdicts[1].second, cycles_seconds));
      write_json(flags.json, header, sampler.samples(), names, verdicts, fields);
    }
  }
  comm.broadcast(&ok, 1, sparcoll::DataType::i32, 0);
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const Flags flags = parse_flags(argc, argv);
  // glibc raises its mmap threshold to the size of each big block freed (up to 32 MiB), after
  // which such blocks come from the heap and their pages stay resident once freed: RSS would
  // then step up whenever a temporary lands on fresh heap, with no byte leaked. Fixing the
  // threshold makes big blocks mmapped and unmapped at free, so RSS follows the live memory.
  if (!flags.malloc_default) mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  try {
    return run(flags, argc, argv);
  } catch (const sparcoll::Error& e) {
    std::fprintf(stderr, "sparcoll-soak: FAIL: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sparcoll-soak: FAIL: %s\n", e.what());
    return 1;
  }
}
