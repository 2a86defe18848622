// The perf suite's library: sweep flags (sizes, lists, impossible combinations), the workload
// reference against a plain dense sum, the JSON lines / speed-up plumbing, and the measurement
// loop taking turns between several collectives.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "bench.hpp"
#include "report.hpp"
#include "sweep.hpp"
#include "workload.hpp"

namespace {

using sparcoll::perf::SweepOptions;

// Parses argv-like flags into SweepOptions; returns the error ("" when accepted).
std::string sweep(std::vector<std::string> args, SweepOptions* out) {
  args.insert(args.begin(), "prog");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  *out = SweepOptions{};
  std::string error;
  for (int i = 1; i < static_cast<int>(argv.size()); ++i) {
    const auto r = sparcoll::perf::parse_sweep_flag(static_cast<int>(argv.size()), argv.data(), &i, out, &error);
    if (r == sparcoll::perf::FlagResult::error) return error;
    if (r == sparcoll::perf::FlagResult::not_mine) return "not a sweep flag: " + std::string(argv[i]);
  }
  if (!sparcoll::perf::finish_sweep(out, &error)) return error;
  return "";
}

TEST(PerfSweep, SizesFollowNcclTestsAndEndAtMaxBytes) {
  SweepOptions o;
  ASSERT_EQ(sweep({"-b", "4K", "-e", "100M", "-f", "16"}, &o), "");
  EXPECT_EQ(o.sizes_bytes, (std::vector<std::uint64_t>{4096, 65536, 1u << 20, 16u << 20, 100u << 20}));
  EXPECT_EQ(sparcoll::perf::sweep_elements(o, "f32").back(), 26214400u);
  EXPECT_EQ(sparcoll::perf::sweep_elements(o, "bf16").front(), 2048u);
  ASSERT_EQ(sweep({"-b", "8", "-e", "64"}, &o), "");  // factor 2 by default
  EXPECT_EQ(o.sizes_bytes, (std::vector<std::uint64_t>{8, 16, 32, 64}));
  ASSERT_EQ(sweep({"--minbytes=1M", "--maxbytes=1M"}, &o), "");
  EXPECT_EQ(o.sizes_bytes, (std::vector<std::uint64_t>{1u << 20}));
  ASSERT_EQ(sweep({"--elements", "1000"}, &o), "");
  EXPECT_EQ(sparcoll::perf::sweep_elements(o, "f16"), (std::vector<std::uint64_t>{1000}));
  ASSERT_EQ(sweep({}, &o), "");
  EXPECT_EQ(sparcoll::perf::sweep_elements(o, "f32"), (std::vector<std::uint64_t>{1u << 20}));
}

TEST(PerfSweep, ListsAndOldFlags) {
  SweepOptions o;
  ASSERT_EQ(sweep({"-d", "0,0.001,1", "--dtype", "f32,bf16", "--block", "256,1024", "--pattern", "random,one_dense",
                   "--check", "--no-header", "--iters", "7", "--warmup", "0", "--seed", "9", "--settle-ms", "250"},
                  &o),
            "");
  EXPECT_EQ(o.settle_ms, 250u);
  EXPECT_EQ(o.densities, (std::vector<double>{0, 0.001, 1}));
  EXPECT_EQ(o.dtypes, (std::vector<std::string>{"f32", "bf16"}));
  EXPECT_EQ(o.blocks, (std::vector<std::uint32_t>{256, 1024}));
  EXPECT_EQ(o.patterns.size(), 2u);
  EXPECT_FALSE(o.header);
  EXPECT_EQ(o.iters, 7);
  EXPECT_EQ(o.warmup, 0);
  EXPECT_EQ(o.seed, 9u);
}

TEST(PerfSweep, ImpossibleCombinationsAreRejectedWithTheReason) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--density", "1.5"}, "[0, 1]"},
      {{"--density", "0.1,-1"}, "[0, 1]"},
      {{"--block", "0"}, "block"},
      {{"-b", "1M", "-e", "4K"}, "larger than -e"},
      {{"-b", "4K", "-e", "1M", "-f", "1"}, "at least 2"},
      {{"-b", "4K", "-e", "1M", "-f", "0"}, "-f"},
      {{"--elements", "10", "-b", "4K"}, "use one of them"},
      {{"-f", "4"}, "needs -b/-e"},
      {{"-b", "2"}, "smaller than one f32 element"},
      {{"-b", "4X"}, "size in bytes"},
      {{"--dtype", "f64"}, "unknown dtype"},
      {{"--op", "prod"}, "unknown op"},
      {{"--pattern", "zipf"}, "unknown pattern"},
      {{"--pattern", "trace:"}, "needs a file"},
      {{"--pattern", "trace:x.sgtrace", "--dtype", "bf16"}, "--dtype f32"},
      {{"--pattern", "trace:x.sgtrace", "--op", "max"}, "--op"},
      {{"--iters", "0"}, "[1, 1000000]"},
      {{"--min-iters", "3"}, "--time-budget"},
      {{"--time-budget", "1", "--iters", "3", "--min-iters", "5"}, "larger than --iters"},
      {{"--iters"}, "missing value"},
      {{"--settle-ms", "60001"}, "[0, 60000]"},
  };
  for (const auto& [args, want] : cases) {
    SweepOptions o;
    const std::string error = sweep(args, &o);
    EXPECT_NE(error.find(want), std::string::npos) << "args: " << ::testing::PrintToString(args) << " gave '" << error
                                                   << "', want it to mention '" << want << "'";
  }
}

// The reference visits only chosen blocks; it must equal a plain dense rank-order reduction.
TEST(PerfWorkload, ReferenceEqualsDenseRankOrderReduction) {
  for (auto pattern : {sparcoll::perf::Pattern::random, sparcoll::perf::Pattern::overlap,
                       sparcoll::perf::Pattern::disjoint, sparcoll::perf::Pattern::one_dense}) {
    for (auto op : {sparcoll::ReduceOp::sum, sparcoll::ReduceOp::min, sparcoll::ReduceOp::max}) {
      for (double density : {0.0, 0.3, 1.0}) {
        sparcoll::perf::WorkloadSpec spec;
        spec.count = 5000;
        spec.block_elems = 64;
        spec.density = density;
        spec.pattern = pattern;
        spec.world_size = 3;
        spec.dtype = sparcoll::DataType::f32;
        std::vector<float> want(spec.count, 0.0f);
        std::vector<std::byte> data;
        for (int r = 0; r < spec.world_size; ++r) {
          sparcoll::perf::generate(spec, r, &data);
          const auto* x = reinterpret_cast<const float*>(data.data());
          for (std::size_t i = 0; i < spec.count; ++i) {
            if (r == 0) want[i] = x[i];
            else if (op == sparcoll::ReduceOp::sum) want[i] += x[i];
            else if (op == sparcoll::ReduceOp::min) want[i] = std::min(want[i], x[i]);
            else want[i] = std::max(want[i], x[i]);
          }
        }
        std::vector<std::byte> got;
        sparcoll::perf::reference(spec, op, &got);
        std::vector<std::byte> want_bytes(spec.count * 4);
        std::memcpy(want_bytes.data(), want.data(), want_bytes.size());
        std::string first;
        EXPECT_EQ(sparcoll::perf::count_wrong(got, want_bytes, spec.dtype, &first), 0u)
            << sparcoll::perf::pattern_name(pattern) << " density " << density << ": " << first;
        // Density: the fraction of non-zero blocks asked for (rank 0 dense in one_dense).
        const std::size_t nblocks = (spec.count + 63) / 64;
        if (pattern != sparcoll::perf::Pattern::disjoint) {
          EXPECT_EQ(sparcoll::perf::nonzero_blocks(spec, 1), static_cast<std::size_t>(std::llround(density * nblocks)));
        }
      }
    }
  }
}

TEST(PerfReport, JsonLinesRoundTripAndSpeedUp) {
  sparcoll::perf::ResultRow row;
  row.system = "sparcoll";
  row.algo = "block_sparse";
  row.transport = "shm";
  row.ranks = 2;
  row.elements = 1024;
  row.dtype = "f32";
  row.op = "sum";
  row.density = 0.01;
  row.pattern = "random";
  row.block = 256;
  row.time_us_median = 10;
  row.host = "a \"quoted\" host\\";
  std::map<std::string, std::string> f;
  ASSERT_TRUE(sparcoll::perf::parse_flat_json(sparcoll::perf::to_json(row), &f));
  EXPECT_EQ(f["kind"], "row");
  EXPECT_EQ(f["host"], row.host);
  EXPECT_EQ(f["bytes"], "4096");
  EXPECT_EQ(f["speedup"], "null");
  EXPECT_FALSE(sparcoll::perf::parse_flat_json("{\"a\":", &f));
  EXPECT_FALSE(sparcoll::perf::parse_flat_json("[1]", &f));

  std::vector<sparcoll::perf::ResultRow> peers(4, row);
  peers[0].system = "mpi";
  peers[0].time_us_median = 50;
  peers[1].system = "gloo";
  peers[1].algo = "ring";
  peers[1].time_us_median = 40;
  peers[1].transport = "tcp";  // other transport: not comparable
  peers[2].system = "mpi";
  peers[2].time_us_median = 20;
  peers[2].density = 0.1;  // other point
  peers[3].system = "mpi";
  peers[3].time_us_median = 5;
  peers[3].wrong = 1;  // wrong results do not count
  sparcoll::perf::apply_speedup(peers, &row);
  EXPECT_DOUBLE_EQ(row.speedup, 5.0);
  EXPECT_EQ(row.speedup_vs, "mpi/block_sparse");
  EXPECT_NE(sparcoll::perf::table_row(row).find("5.00x"), std::string::npos);
  EXPECT_NE(sparcoll::perf::csv_header().find("sent_bytes_per_rank,recv_bytes_per_rank"), std::string::npos);
}

TEST(PerfReport, BuildCommitIsKnownOrUnknown) {
  EXPECT_GT(std::strlen(sparcoll::perf::build_commit()), 0u);
}

// One rank's allreduce (the result is the input), counting its calls into a shared log; `skew`
// adds to every result element, so that its result is wrong.
class OneRank final : public sparcoll::perf::Collective {
 public:
  OneRank(char name, std::string* calls, float skew = 0) : name_(name), calls_(calls), skew_(skew) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void barrier() override {}
  void allreduce(const void* send, void* recv, std::size_t count, sparcoll::DataType dtype, sparcoll::ReduceOp) override {
    ASSERT_EQ(dtype, sparcoll::DataType::f32);
    auto* out = static_cast<float*>(recv);
    std::memmove(out, send, count * sizeof(float));
    for (std::size_t i = 0; i < count; ++i) out[i] += skew_;
    calls_->push_back(name_);
  }
  void max_f64(double*, std::size_t) override {}
  void sum_u64(std::uint64_t*, std::size_t) override {}

 private:
  char name_;
  std::string* calls_;
  float skew_;
};

// Call by call: every collective gets the same number of calls, one each per turn; each one's last
// result is checked (those whose result the buffer does not hold make one more call for it), and
// a wrong collective is counted wrong alone.
TEST(PerfSweep, SeveralCollectivesTakeTurnsCallByCallAndEachIsChecked) {
  SweepOptions o;
  ASSERT_EQ(sweep({"--elements", "1000", "--density", "0.5", "--iters", "3", "--warmup", "1", "--no-header"}, &o), "");
  std::string calls;
  OneRank a('a', &calls), b('b', &calls), wrong('w', &calls, 1.0f);
  sparcoll::perf::Collective* const collectives[] = {&a, &b, &wrong};
  std::vector<sparcoll::perf::SweepRun> runs(3);
  runs[0].identity.algo = "a";
  runs[1].identity.algo = "b";
  runs[2].identity.algo = "wrong";
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  const std::uint64_t wrong_elements = sparcoll::perf::run_sweep(collectives, o, runs);
  const std::string out = testing::internal::GetCapturedStdout();
  const std::string err = testing::internal::GetCapturedStderr();
  // One warm-up and three timed turns, each a permutation of "abw"; then the two collectives
  // whose result the buffer does not hold call once more each.
  ASSERT_EQ(calls.size(), 4 * 3 + 2u) << calls;
  for (std::size_t turn = 0; turn < 4; ++turn) {
    std::string t = calls.substr(3 * turn, 3);
    std::sort(t.begin(), t.end());
    EXPECT_EQ(t, "abw") << calls;
  }
  const char holder = calls[11];
  EXPECT_EQ(calls.find(holder, 12), std::string::npos) << calls;
  EXPECT_NE(calls[12], calls[13]) << calls;
  EXPECT_GT(wrong_elements, 0u);
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;  // one collective's wrong result reported
  std::size_t rows = 0;
  for (std::size_t at = out.find("sparcoll "); at != std::string::npos; at = out.find("sparcoll ", at + 1)) ++rows;
  EXPECT_EQ(rows, 3u) << out;
}

}  // namespace
