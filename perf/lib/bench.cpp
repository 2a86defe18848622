#include "bench.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <span>
#include <stdexcept>
#include <vector>

#include "workload.hpp"

#if __has_include("trace.hpp")
#include "trace.hpp"
#define SPARCOLL_PERF_TRACE 1
#else
#define SPARCOLL_PERF_TRACE 0
#endif

namespace sparcoll::perf {

namespace {

using Clock = std::chrono::steady_clock;

std::string base_name(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The input of one point: synthetic (the same tensor every iteration) or a trace (each
// iteration the next recorded step).
struct Input {
  WorkloadSpec spec;
  std::vector<std::byte> pristine;  // synthetic
  std::string pattern_label;
#if SPARCOLL_PERF_TRACE
  const GradientTrace* trace = nullptr;
  std::vector<float> gradient;
#endif
  // --bucket-mb: [first element, count) of each bucket, in the trace's (DDP's) order; empty: one
  // allreduce of the whole tensor.
  std::vector<std::pair<std::size_t, std::size_t>> buckets;
  bool is_trace() const {
#if SPARCOLL_PERF_TRACE
    return trace != nullptr;
#else
    return false;
#endif
  }
};

// Loads iteration `iteration`'s input of `rank` into `work`.
void load_input(Input& in, int rank, std::uint64_t iteration, std::vector<std::byte>* work) {
#if SPARCOLL_PERF_TRACE
  if (in.trace != nullptr) {
    const auto worker = static_cast<std::uint32_t>(rank) % in.trace->workers;
    const auto step = static_cast<std::uint32_t>(iteration % in.trace->steps);
    trace_gradient(*in.trace, worker, step, &in.gradient);
    std::memcpy(work->data(), in.gradient.data(), in.gradient.size() * sizeof(float));
    return;
  }
#endif
  (void)rank;
  (void)iteration;
  std::memcpy(work->data(), in.pristine.data(), in.pristine.size());
}

// Wrong elements of `got`, the result of iteration `iteration`.
std::uint64_t check(Input& in, const Collective& c, ReduceOp op, std::uint64_t iteration, const std::vector<std::byte>& got,
                    std::string* first) {
#if SPARCOLL_PERF_TRACE
  if (in.trace != nullptr) {
    // Rank-order fp32 sum of what each rank replayed, and the sum of magnitudes that bounds the
    // rounding of any other order: |error| <= (n-1) u sum|x| with u = 2^-24 (plus an ulp).
    const std::size_t n = in.trace->elements;
    std::vector<float> sum(n, 0.0f), magnitude(n, 0.0f);
    const auto step = static_cast<std::uint32_t>(iteration % in.trace->steps);
    for (int r = 0; r < c.size(); ++r) {
      trace_gradient(*in.trace, static_cast<std::uint32_t>(r) % in.trace->workers, step, &in.gradient);
      for (std::size_t i = 0; i < n; ++i) {
        sum[i] += in.gradient[i];
        magnitude[i] += std::fabs(in.gradient[i]);
      }
    }
    const bool exact = c.rank_order();
    const float ranks = static_cast<float>(c.size());
    const float bound_scale = static_cast<float>(c.size() - 1) * 0x1p-24f * 1.01f;
    std::uint64_t wrong = 0;
    const auto* g = reinterpret_cast<const float*>(got.data());
    for (std::size_t i = 0; i < n; ++i) {
      float want = sum[i], mag = magnitude[i];
      if (op == ReduceOp::avg) {
        want /= ranks;
        mag /= ranks;
      }
      const float tolerance = exact ? 0.0f : bound_scale * mag + std::fabs(want) * 0x1p-23f;
      const bool ok = g[i] == want || (std::isnan(g[i]) && std::isnan(want)) || std::fabs(g[i] - want) <= tolerance;
      if (!ok) {
        if (wrong == 0 && first != nullptr)
          *first = "element " + std::to_string(i) + ": got " + std::to_string(g[i]) + ", want " + std::to_string(want);
        ++wrong;
      }
    }
    return wrong;
  }
#endif
  (void)iteration;
  (void)c;
  std::vector<std::byte> want;
  reference(in.spec, op, &want);
  return count_wrong(got, want, in.spec.dtype, first);
}

#if SPARCOLL_PERF_TRACE
// Mean fraction of non-zero blocks (of `block` elements) over the ranks' workers and all steps.
double trace_density(const GradientTrace& t, int ranks, std::uint32_t block) {
  if (t.elements == 0) return 0;
  const std::uint64_t nblocks = (t.elements + block - 1) / block;
  std::vector<float> g;
  double total = 0;
  const int workers = std::min<int>(ranks, static_cast<int>(t.workers));
  for (int w = 0; w < workers; ++w) {
    for (std::uint32_t s = 0; s < t.steps; ++s) {
      trace_gradient(t, static_cast<std::uint32_t>(w), s, &g);
      std::uint64_t nonzero = 0;
      for (std::uint64_t b = 0; b < nblocks; ++b) {
        const std::size_t first = b * block, last = std::min<std::size_t>(g.size(), first + block);
        for (std::size_t i = first; i < last; ++i)
          if (g[i] != 0.0f) {
            ++nonzero;
            break;
          }
      }
      total += static_cast<double>(nonzero) / static_cast<double>(nblocks);
    }
  }
  return total / (static_cast<double>(workers) * t.steps);
}
#endif

void write_or_throw(bool ok, const std::string& error) {
  if (!ok) throw std::runtime_error(error);
}

}  // namespace

bool trace_supported() { return SPARCOLL_PERF_TRACE != 0; }

namespace {

// Small allreduces of the collective under test for `ms` milliseconds, decided on the slowest
// rank's clock every 32 calls so that every rank stops at the same one. Just after start-up the
// scheduler has not yet spread the ranks over the cores: 4 ranks on 2 cores over tcp took 80-85
// us per 4 KiB allreduce in half of the runs that measured their first 40 ms, and 50-53 us in
// nearly every run that first ran 3000 allreduces (whatever the system: each program's first
// points would measure where the scheduler put its processes, not the system).
void settle(Collective& c, std::uint64_t ms) {
  if (ms == 0) return;
  std::vector<float> buffer(1024, 1.0f);
  c.prepare(buffer.data(), buffer.size(), DataType::f32, ReduceOp::max);
  const auto started = Clock::now();
  for (;;) {
    for (int i = 0; i < 32; ++i) c.allreduce(buffer.data(), buffer.data(), buffer.size(), DataType::f32, ReduceOp::max);
    double elapsed_ms = std::chrono::duration<double, std::milli>(Clock::now() - started).count();
    c.max_f64(&elapsed_ms, 1);
    if (elapsed_ms >= static_cast<double>(ms)) return;
  }
}

// The order in which `n` collectives take their turns in iteration `turn`: a permutation drawn
// from (seed, turn), the same on every rank (they must call the same algorithm at the same time).
// Not a fixed rotation: with one, each collective always follows the same other one, and an
// algorithm after one that filled the cache with dense buffers starts colder than one after a
// sparse algorithm (16 MiB, 2 ranks over tcp, 1%: block recursive doubling after a dense
// recursive doubling every time took 1.18 ms against the hybrid's 0.85 after block-sparse; the
// two alone, taking turns, 0.80-0.85 ms both).
void turn_order(std::size_t n, std::uint64_t seed, std::uint64_t turn, std::vector<std::size_t>* order) {
  order->resize(n);
  for (std::size_t i = 0; i < n; ++i) (*order)[i] = i;
  const std::uint64_t key = mix(seed, turn);
  for (std::size_t i = n; i > 1; --i) std::swap((*order)[i - 1], (*order)[mix(key, i) % i]);  // Fisher-Yates
}

// One collective's measurement at the point being run.
struct Contender {
  Collective* collective = nullptr;
  const SweepRun* run = nullptr;
  std::uint64_t iteration = 0;  // which input (a trace's step) its next call gets
  std::vector<double> warm, times;
  int warmups = 0;
  std::uint64_t sent = 0, received = 0, barrier_sent = 0, barrier_received = 0;
  bool measured = true;
  std::uint64_t wrong = 0;
  std::string first_wrong;
};

#if SPARCOLL_PERF_TRACE
using TraceCache = std::map<std::string, std::unique_ptr<GradientTrace>>;

// Points `in` at the trace of `pattern` (loaded once per file): a trace gives its own size and
// density, so one point per trace; with --bucket-mb its step is sent as DDP's buckets.
void use_trace(const std::string& pattern, const SweepOptions& o, int rank, int nranks, std::uint32_t block,
               TraceCache* traces, Input* in, std::vector<double>* densities, std::vector<std::uint64_t>* sizes) {
  auto& slot = (*traces)[trace_path(pattern)];
  if (!slot) {
    slot = std::make_unique<GradientTrace>();
    std::string error;
    if (!load_trace(trace_path(pattern), slot.get(), &error)) throw std::runtime_error(error);
    if (slot->workers == 0 || slot->steps == 0) throw std::runtime_error(trace_path(pattern) + ": empty trace");
  }
  in->trace = slot.get();
  *densities = {rank == 0 ? trace_density(*in->trace, nranks, block) : 0.0};
  *sizes = {in->trace->elements};
  in->pattern_label = "trace:" + base_name(trace_path(pattern));
  in->buckets.clear();
  if (o.bucket_mb == 0) return;
  // DDP fills a bucket with consecutive parameters until it holds bucket_cap_mb.
  const std::size_t cap = o.bucket_mb * (std::size_t{1} << 20) / 4;
  std::size_t first = 0, filled = 0;
  for (const TraceParameter& p : in->trace->parameters) {
    filled += p.count;
    if (filled >= cap) {
      in->buckets.emplace_back(first, p.offset + p.count - first);
      first = p.offset + p.count;
      filled = 0;
    }
  }
  if (first < in->trace->elements || in->buckets.empty()) in->buckets.emplace_back(first, in->trace->elements - first);
  in->pattern_label += "/b" + std::to_string(o.bucket_mb);
}
#endif

// One point of the sweep measured on every contender: the warm-up, the timed calls (several
// collectives take turns call by call, in an order drawn anew every time, so that each meets the
// host's fast and slow moments and every neighbour alike), and each one's last result checked.
class PointMeasurement {
 public:
  PointMeasurement(std::vector<Contender>* measured, Collective* helpers, Input* in, const SweepOptions& o,
                   std::size_t count, DataType dtype, ReduceOp op, std::vector<std::byte>* work, void* recv,
                   const std::vector<std::byte>* result)
      : measured_(*measured), c_(*helpers), in_(*in), o_(o), count_(count), dtype_(dtype), op_(op), work_(*work),
        recv_(recv), result_(*result) {}

  // Returns the number of timed calls each contender made.
  int run() {
    warm_up();
    int iters = fit_iterations();
    sample_barriers(iters);
    iters = time_calls(iters);
    for (Contender& m : measured_) c_.max_f64(m.times.data(), m.times.size());  // the slowest rank's time
    check_results();
    return iters;
  }

 private:
  double call(Contender& m) {
    const std::size_t esize = dtype_size(dtype_);
    load_input(in_, c_.rank(), m.iteration++, &work_);
    m.collective->barrier();
    const auto t0 = Clock::now();
    if (in_.buckets.empty()) {
      m.collective->allreduce(work_.data(), recv_, count_, dtype_, op_);
    } else {
      for (const auto& [first, n] : in_.buckets)
        m.collective->allreduce(work_.data() + first * esize, static_cast<std::byte*>(recv_) + first * esize, n,
                                dtype_, op_);
    }
    const auto t1 = Clock::now();
    last_caller_ = &m;
    return std::chrono::duration<double, std::micro>(t1 - t0).count();
  }

  const std::vector<std::size_t>& next_turn() {
    turn_order(measured_.size(), o_.seed, turn_++, &order_);
    return order_;
  }

  void warm_up() {
    std::vector<bool> warming(measured_.size(), true);
    for (int w = 0; w < o_.warmup; ++w) {
      for (const std::size_t k : next_turn()) {
        Contender& m = measured_[k];
        if (!warming[k]) continue;
        m.warm.push_back(call(m));
        if (w == 0 && o_.time_budget_s > 0 && o_.warmup > 1) {
          // One slow iteration is warm-up enough: skip the others when it already took a
          // quarter of the budget (decided on the slowest rank's time, so by every rank alike).
          double first_us = m.warm[0];
          c_.max_f64(&first_us, 1);
          if (first_us > o_.time_budget_s * 1e6 / 4) warming[k] = false;
        }
      }
    }
    for (Contender& m : measured_) m.warmups = static_cast<int>(m.warm.size());
  }

  // Every contender makes the same number of timed calls: the budget per contender over the
  // mean warm-up estimate.
  int fit_iterations() {
    if (o_.time_budget_s <= 0 || o_.warmup == 0) return o_.iters;
    double estimates_us = 0;
    for (Contender& m : measured_) {
      c_.max_f64(m.warm.data(), m.warm.size());  // the same estimate, hence the same count, on every rank
      std::sort(m.warm.begin(), m.warm.end());
      estimates_us += std::max(1.0, m.warm[m.warm.size() / 2]);
    }
    const double fit = std::ceil(o_.time_budget_s * 1e6 * static_cast<double>(measured_.size()) / estimates_us);
    return static_cast<int>(std::clamp(fit, static_cast<double>(o_.min_iters), static_cast<double>(o_.iters)));
  }

  // Each timed iteration starts with a barrier, whose messages the transport counters see too:
  // measure what barriers alone cost this rank and take it off. (A barrier's last messages may be
  // counted just after it returns; over several barriers, and over the iterations, that shift
  // cancels.)
  void sample_barriers(int iters) {
    constexpr int kBarrierSamples = 4;
    for (Contender& m : measured_) {
      std::uint64_t s0 = 0, r0 = 0, s1 = 0, r1 = 0;
      m.measured = m.collective->traffic(&s0, &r0) && m.measured;
      for (int b = 0; b < kBarrierSamples; ++b) m.collective->barrier();
      m.measured = m.collective->traffic(&s1, &r1) && m.measured;
      m.barrier_sent = (s1 - s0) / kBarrierSamples;
      m.barrier_received = (r1 - r0) / kBarrierSamples;
      m.times.assign(static_cast<std::size_t>(iters), 0.0);
    }
  }

  // The estimate is from a few warm-up iterations and counts only the timed calls: when the host
  // gets busier (a loaded 2-core machine made a 6 s budget last 150 s) the run stops after twice
  // the budget of wall time per contender, decided on the slowest rank's clock every 32
  // iterations so that every rank stops at the same one. Returns the calls each made.
  int time_calls(int iters) {
    const auto started = Clock::now();
    for (int it = 0; it < iters; ++it) {
      if (o_.time_budget_s > 0 && it >= o_.min_iters && it % 32 == 0) {
        double elapsed_s = std::chrono::duration<double>(Clock::now() - started).count();
        c_.max_f64(&elapsed_s, 1);
        if (elapsed_s > 2 * o_.time_budget_s * static_cast<double>(measured_.size())) {
          for (Contender& m : measured_) m.times.resize(static_cast<std::size_t>(it));
          return it;
        }
      }
      for (const std::size_t k : next_turn()) {
        Contender& m = measured_[k];
        std::uint64_t s0 = 0, r0 = 0, s1 = 0, r1 = 0;
        m.measured = m.collective->traffic(&s0, &r0) && m.measured;
        m.times[static_cast<std::size_t>(it)] = call(m);
        m.measured = m.collective->traffic(&s1, &r1) && m.measured;
        m.sent += (s1 - s0) - std::min(s1 - s0, m.barrier_sent);
        m.received += (r1 - r0) - std::min(r1 - r0, m.barrier_received);
      }
    }
    return iters;
  }

  // Each contender's last result, element by element: the buffer holds the last caller's; every
  // other contender makes one more (untimed) call for its check.
  void check_results() {
    auto check_last = [&](Contender& m) {
      if (m.collective->computes_allreduce())
        m.wrong = check(in_, *m.collective, op_, m.iteration - 1, result_, &m.first_wrong);
    };
    const Contender* const holder = last_caller_;
    for (Contender& m : measured_)
      if (&m == holder) check_last(m);
    for (Contender& m : measured_) {
      if (&m == holder) continue;
      call(m);
      check_last(m);
    }
  }

  std::vector<Contender>& measured_;
  Collective& c_;  // the untimed helpers run on it
  Input& in_;
  const SweepOptions& o_;
  std::size_t count_;
  DataType dtype_;
  ReduceOp op_;
  std::vector<std::byte>& work_;
  void* recv_;
  const std::vector<std::byte>& result_;  // where recv_ points: the work buffer, or the out-of-place one
  const Contender* last_caller_ = nullptr;  // whose result the buffer holds
  std::vector<std::size_t> order_;
  std::uint64_t turn_ = 0;
};

}  // namespace

std::uint64_t run_sweep(Collective& c, const SweepOptions& o, const SweepRun& run) {
  Collective* const collectives[] = {&c};
  return run_sweep(collectives, o, std::span<const SweepRun>(&run, 1));
}

std::uint64_t run_sweep(std::span<Collective* const> collectives, const SweepOptions& o, std::span<const SweepRun> runs) {
  if (collectives.empty() || collectives.size() != runs.size())
    throw std::invalid_argument("run_sweep: one run per collective, at least one");
  // The helpers (barrier aside, which each collective times with its own) run on the first.
  Collective& c = *collectives[0];
  const SweepRun& run = runs[0];
  const int rank = c.rank();
  const int nranks = c.size();
  const auto op = *parse_reduce_op(o.op);

  std::vector<ResultRow> peers;
  std::string error;
  if (rank == 0 && !o.baseline.empty() && !load_peer_rows(o.baseline, &peers, &error)) throw std::runtime_error(error);

  if (rank == 0 && o.header) {
    std::printf("%s%s\n", header_lines(run.header).c_str(), table_header().c_str());
    if (!o.json.empty()) write_or_throw(append_text(o.json, header_json(run.header) + "\n", &error), error);
    if (!o.csv.empty()) write_or_throw(append_text(o.csv, header_lines(run.header), &error), error);
    std::fflush(stdout);
  }

#if SPARCOLL_PERF_TRACE
  TraceCache traces;
#endif

  settle(c, o.settle_ms);

  const std::vector<std::uint32_t> blocks = o.blocks.empty() ? std::vector<std::uint32_t>{run.default_block} : o.blocks;
  std::uint64_t wrong_total = 0;
  std::vector<std::byte> work, out;

  for (std::uint32_t block : blocks) {
    for (const std::string& pattern : o.patterns) {
      for (const std::string& dtype_name : o.dtypes) {
        const DataType dtype = *parse_dtype(dtype_name);
        const std::size_t esize = dtype_size(dtype);
        std::vector<double> densities = o.densities;
        std::vector<std::uint64_t> sizes = sweep_elements(o, dtype_name);
        Input in;
        in.pattern_label = pattern;
        if (is_trace_pattern(pattern)) {
#if SPARCOLL_PERF_TRACE
          use_trace(pattern, o, rank, nranks, block, &traces, &in, &densities, &sizes);
#else
          throw std::runtime_error("--pattern " + pattern +
                                   ": this build has no gradient trace support (perf/lib/trace.hpp was missing)");
#endif
        } else {
          parse_pattern(pattern, &in.spec.pattern);
        }

        for (double density : densities) {
          for (std::uint64_t count : sizes) {
            in.spec.count = count;
            in.spec.dtype = dtype;
            in.spec.density = density;
            in.spec.block_elems = block;
            in.spec.seed = o.seed;
            in.spec.world_size = nranks;
            if (!in.is_trace()) generate(in.spec, rank, &in.pristine);
            work.assign(count * esize, std::byte{0});
            if (run.out_of_place) out.assign(count * esize, std::byte{0});
            void* recv = run.out_of_place ? out.data() : work.data();

            std::vector<Contender> measured(collectives.size());
            for (std::size_t k = 0; k < collectives.size(); ++k) {
              measured[k].collective = collectives[k];
              measured[k].run = &runs[k];
              collectives[k]->prepare(work.data(), count, dtype, op);
            }
            const int iters =
                PointMeasurement(&measured, &c, &in, o, count, dtype, op, &work, recv, run.out_of_place ? &out : &work)
                    .run();

            for (Contender& m : measured) {
              if (m.wrong != 0)
                std::fprintf(stderr, "%s: rank %d: %s %s, %llu elements, density %g: %llu wrong elements, first %s\n",
                             m.run->program, rank, in.pattern_label.c_str(), dtype_name.c_str(),
                             static_cast<unsigned long long>(count), density, static_cast<unsigned long long>(m.wrong),
                             m.first_wrong.c_str());
              std::uint64_t totals[3] = {m.sent, m.received, m.wrong};
              c.sum_u64(totals, 3);
              wrong_total += totals[2];

              if (rank != 0) continue;
              ResultRow row = m.run->identity;
              row.ranks = nranks;
              row.elements = count;
              row.dtype = dtype_name;
              row.op = o.op;
              row.density = density;
              row.pattern = in.pattern_label;
              row.block = block;
              row.iters = iters;
              if (const std::string ran = m.collective->ran_algorithm(); !ran.empty() && ran != row.algo)
                row.algo += ":" + ran;
              row.warmup = m.warmups;
              row.wrong = totals[2];
              row.host = host_name();
              row.commit = build_commit();
              if (m.measured) {
                row.bytes_source = "measured";
                row.sent_bytes_per_rank = iters > 0 ? static_cast<double>(totals[0]) / nranks / iters : 0;
                row.recv_bytes_per_rank = iters > 0 ? static_cast<double>(totals[1]) / nranks / iters : 0;
              } else {
                row.bytes_source = "model";
                m.collective->model_traffic(count * esize, &row.sent_bytes_per_rank, &row.recv_bytes_per_rank);
              }
              row.wire_bytes_per_rank = row.sent_bytes_per_rank + row.recv_bytes_per_rank;
              summarize(m.times, count * esize, &row);
              apply_speedup(peers, &row);
              std::printf("%s\n", table_row(row).c_str());
              std::fflush(stdout);
              if (!o.json.empty()) write_or_throw(append_json(o.json, row, &error), error);
              if (!o.csv.empty()) write_or_throw(append_csv(o.csv, row, &error), error);
            }
          }
        }
      }
    }
  }
  return wrong_total;
}

}  // namespace sparcoll::perf
