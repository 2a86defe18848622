// sparcoll-perf-kernels: throughput of the block layer's kernels (src/block: the non-zero bitmap
// scan and the reduction into fp32 accumulators) and of the compression kernels of the sparse
// algorithms (src/algo/compress: threshold selection, QSGD) next to what the memory can do, measured in
// the same run: a STREAM-like sum of a large array (read bandwidth) and a copy, on one thread
// and on every core. Each figure is the median over repetitions, in GB/s of tensor bytes (copy:
// bytes read + written, as STREAM counts), with the ratio to the read bandwidth at the same
// thread count: a scan of an all-zero tensor can at best match it.
//   sparcoll-perf-kernels [--bytes SIZE] [--reps N] [--quick] [--json FILE] [--csv FILE] [--no-header]
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "algo/compress/qsgd.hpp"
#include "algo/compress/select_above_kernels.hpp"
#include "block/bitmap.hpp"
#include "block/bitmap_kernels.hpp"
#include "block/reduce.hpp"
#include "block/reduce_kernels.hpp"
#include "block/simd_level.hpp"
#include "report.hpp"
#include "sweep.hpp"
#include "workload.hpp"

namespace {

using Clock = std::chrono::steady_clock;
namespace block = sparcoll::block;

struct Flags {
  std::uint64_t bytes = 64ull << 20;
  int reps = 5;
  std::string json, csv;
  bool header = true;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "sparcoll-perf-kernels: %s\n"
               "usage: sparcoll-perf-kernels [--bytes SIZE] [--reps N] [--quick] [--json FILE] [--csv FILE] [--no-header]\n"
               "  --bytes SIZE   tensor size (default 64M; K, M, G suffixes), at least 1M\n"
               "  --reps N       repetitions, the median is reported (default 5)\n"
               "  --quick        --bytes 8M --reps 3\n",
               why.c_str());
  std::exit(2);
}

Flags parse(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage("missing value after " + a);
      return argv[++i];
    };
    std::uint64_t n = 0;
    if (a == "--bytes") {
      if (!sparcoll::perf::parse_size(value(), &f.bytes) || f.bytes < (1u << 20) || f.bytes > (16ull << 30))
        usage("--bytes takes a size in [1M, 16G]");
    } else if (a == "--reps") {
      if (!sparcoll::perf::parse_u64(value(), &n) || n == 0 || n > 1000) usage("--reps takes an integer in [1, 1000]");
      f.reps = static_cast<int>(n);
    } else if (a == "--quick") {
      f.bytes = 8u << 20;
      f.reps = 3;
    } else if (a == "--json") f.json = value();
    else if (a == "--csv") f.csv = value();
    else if (a == "--no-header") f.header = false;
    else if (a == "-h" || a == "--help") {
      std::printf("usage: sparcoll-perf-kernels [--bytes SIZE] [--reps N] [--quick] [--json FILE] [--csv FILE]\n");
      std::exit(0);
    } else usage("unknown flag " + a);
  }
  return f;
}

struct KernelRow {
  std::string name, dtype, simd;
  double density = -1;  // < 0: not applicable
  int threads = 1;
  std::uint64_t bytes = 0;
  double time_us = 0, GBps = 0, ratio = 0;  // ratio: GBps / read bandwidth at the same thread count
};

double median_us(int reps, const std::function<void()>& fn) {
  fn();  // warm: page faults, caches, TBB's threads
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    fn();
    t.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

volatile float g_sink = 0;

float sum_range(const float* p, std::size_t n) {
#if defined(__AVX2__)
  // Eight independent accumulators: enough loads in flight to be bound by memory, not by the
  // latency of the additions.
  __m256 a[8];
  for (auto& v : a) v = _mm256_setzero_ps();
  std::size_t i = 0;
  for (; i + 64 <= n; i += 64)
    for (int k = 0; k < 8; ++k) a[k] = _mm256_add_ps(a[k], _mm256_loadu_ps(p + i + 8 * k));
  for (int k = 1; k < 8; ++k) a[0] = _mm256_add_ps(a[0], a[k]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, a[0]);
  float s = 0;
  for (float v : lanes) s += v;
  for (; i < n; ++i) s += p[i];
  return s;
#else
  float s = 0;
  for (std::size_t i = 0; i < n; ++i) s += p[i];
  return s;
#endif
}

void must_ok(const sparcoll::Status& status) {
  if (status.ok()) return;
  std::fprintf(stderr, "sparcoll-perf-kernels: %s\n", status.to_string().c_str());
  std::exit(1);
}

// Runs fn(first, last) over [0, n) split across `threads` threads.
void parallel(int threads, std::size_t n, const std::function<void(std::size_t, std::size_t)>& fn) {
  if (threads <= 1) {
    fn(0, n);
    return;
  }
  std::vector<std::thread> pool;
  const std::size_t chunk = (n + threads - 1) / threads;
  for (int t = 0; t < threads; ++t) {
    const std::size_t first = std::min(n, t * chunk), last = std::min(n, first + chunk);
    pool.emplace_back(fn, first, last);
  }
  for (auto& th : pool) th.join();
}

}  // namespace

int main(int argc, char** argv) {
  const Flags flags = parse(argc, argv);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const std::size_t n = flags.bytes / 4;  // fp32 elements
  const std::size_t bytes = n * 4;
  const std::uint32_t kBlock = 256;
  std::vector<KernelRow> rows;
  double read_bw[2] = {0, 0};  // 1 thread, all cores

  std::vector<float> a(n, 1.0f), b(n, 0.0f);
  // References: read (sum) and copy, one thread and every core.
  for (int threads : {1, cores}) {
    KernelRow r;
    r.name = "read_sum";
    r.dtype = "f32";
    r.simd = "avx2";
    r.threads = threads;
    r.bytes = bytes;
    std::vector<float> partial(static_cast<std::size_t>(threads));
    r.time_us = median_us(flags.reps, [&] {
      parallel(threads, n, [&](std::size_t first, std::size_t last) {
        const float s = sum_range(a.data() + first, last - first);
        g_sink = g_sink + s;
      });
    });
    r.GBps = static_cast<double>(bytes) / (r.time_us * 1e3);
    read_bw[threads == 1 ? 0 : 1] = r.GBps;
    r.ratio = 1.0;
    rows.push_back(r);
    if (cores == 1) break;
  }
  if (cores == 1) read_bw[1] = read_bw[0];
  for (int threads : {1, cores}) {
    KernelRow r;
    r.name = "copy";
    r.dtype = "f32";
    r.simd = "memcpy";
    r.threads = threads;
    r.bytes = 2 * bytes;
    r.time_us = median_us(flags.reps, [&] {
      parallel(threads, n, [&](std::size_t first, std::size_t last) {
        std::memcpy(b.data() + first, a.data() + first, (last - first) * 4);
      });
    });
    r.GBps = static_cast<double>(r.bytes) / (r.time_us * 1e3);
    r.ratio = r.GBps / read_bw[threads == 1 ? 0 : 1];
    rows.push_back(r);
    if (cores == 1) break;
  }

  // The bitmap scan over tensors of the perf suite's data (random blocks, OmniReduce style).
  std::vector<block::SimdLevel> levels = {block::SimdLevel::scalar};
  if (block::simd_level_supported(block::SimdLevel::avx2)) levels.push_back(block::SimdLevel::avx2);
  if (block::simd_level_supported(block::SimdLevel::avx512)) levels.push_back(block::SimdLevel::avx512);
  std::vector<std::uint64_t> bits(block::bitmap_words(block::block_count(n, kBlock)));
  std::vector<std::byte> tensor;
  for (double density : {0.0, 0.01, 1.0}) {
    sparcoll::perf::WorkloadSpec spec;
    spec.count = n;
    spec.density = density;
    spec.block_elems = kBlock;
    sparcoll::perf::generate(spec, 0, &tensor);
    // The library's entry point: its scan's SIMD level, every core through TBB for large tensors.
    {
      KernelRow r;
      r.name = "scan";
      r.dtype = "f32";
      r.density = density;
      r.simd = block::simd_level_name(block::scan_simd_level());
      r.threads = bytes > (8u << 20) ? cores : 1;
      r.bytes = bytes;
      r.time_us = median_us(flags.reps, [&] { block::scan_nonzero_blocks(tensor.data(), n, spec.dtype, kBlock, bits.data()); });
      r.GBps = static_cast<double>(bytes) / (r.time_us * 1e3);
      r.ratio = r.GBps / read_bw[r.threads == 1 ? 0 : 1];
      rows.push_back(r);
    }
    // Each SIMD level of the scan on one thread (it has no AVX-512 kernel: src/block/bitmap.cpp):
    // 4 MiB pieces stay under the library's parallel threshold.
    const std::size_t piece = (4u << 20) / 4 / (64 * kBlock) * (64 * kBlock);
    for (block::SimdLevel level : levels) {
      if (level > block::SimdLevel::avx2) continue;
      KernelRow r;
      r.name = "scan";
      r.dtype = "f32";
      r.density = density;
      r.simd = block::simd_level_name(level);
      r.threads = 1;
      r.bytes = bytes;
      r.time_us = median_us(flags.reps, [&] {
        for (std::size_t first = 0; first < n; first += piece) {
          const std::size_t count = std::min(piece, n - first);
          block::scan_nonzero_blocks_at(level, reinterpret_cast<const float*>(tensor.data()) + first, count,
                                        sparcoll::DataType::f32, kBlock, bits.data() + first / kBlock / 64);
        }
      });
      r.GBps = static_cast<double>(bytes) / (r.time_us * 1e3);
      r.ratio = r.GBps / read_bw[0];
      rows.push_back(r);
    }
  }

  // Reduction into an fp32 accumulator, one 256-element block per call as an aggregator does:
  // f32 and bf16 contributions, a tensor larger than the caches and one that stays in L2.
  std::vector<float> acc(n, 0.0f);
  std::vector<std::uint16_t> half(n, 0x3f80);  // bf16 1.0
  for (sparcoll::DataType dt : {sparcoll::DataType::f32, sparcoll::DataType::bf16}) {
    const void* src = dt == sparcoll::DataType::f32 ? static_cast<const void*>(a.data()) : half.data();
    const std::size_t esize = sparcoll::dtype_size(dt);
    for (bool cached : {false, true}) {
      const std::size_t count = cached ? std::min<std::size_t>(n, 32768) : n;  // 128 KiB of accumulator
      const int loops = cached ? static_cast<int>(std::max<std::size_t>(1, n / count)) : 1;
      for (block::SimdLevel level : levels) {
        KernelRow r;
        r.name = cached ? "reduce_l2" : "reduce";
        r.dtype = dt == sparcoll::DataType::f32 ? "f32" : "bf16";
        r.simd = block::simd_level_name(level);
        r.threads = 1;
        r.bytes = static_cast<std::uint64_t>(count) * esize * loops;  // contribution bytes read
        r.time_us = median_us(flags.reps, [&] {
          for (int l = 0; l < loops; ++l)
            for (std::size_t first = 0; first < count; first += kBlock)
              block::acc_reduce_at(level, dt, sparcoll::ReduceOp::sum,
                                   static_cast<const unsigned char*>(src) + first * esize, acc.data() + first,
                                   std::min<std::size_t>(kBlock, count - first));
        });
        r.GBps = static_cast<double>(r.bytes) / (r.time_us * 1e3);
        r.ratio = r.GBps / read_bw[0];
        rows.push_back(r);
      }
    }
  }
  g_sink = g_sink + acc[0];

  // Compression kernels (src/algo/compress) over normally distributed values, GB/s of fp32
  // input: threshold selection at 1% (|z| >= 2.576) at each SIMD level, and QSGD encode and
  // decode-add (buckets of 1024) at each width.
  std::vector<float> grad(n);
  {
    std::mt19937 rng(1);
    std::normal_distribution<float> normal;
    for (auto& x : grad) x = normal(rng);
  }
  std::vector<std::uint32_t> sel_idx(n / 50 + 64);
  std::vector<float> sel_val(sel_idx.size());
  for (block::SimdLevel level : levels) {
    KernelRow r;
    r.name = "select";
    r.dtype = "f32";
    r.density = 0.01;
    r.simd = block::simd_level_name(level);
    r.bytes = bytes;
    const auto kernel = sparcoll::algo::compress::select_above_kernel(level);
    r.time_us = median_us(flags.reps, [&] {
      g_sink = g_sink + static_cast<float>(kernel(grad.data(), n, 2.576f, sel_idx.data(), sel_val.data(), sel_idx.size()));
    });
    r.GBps = static_cast<double>(bytes) / (r.time_us * 1e3);
    r.ratio = r.GBps / read_bw[0];
    rows.push_back(r);
  }
  for (unsigned bits : {2u, 4u, 8u}) {
    std::size_t encoded_bytes = 0;
    must_ok(sparcoll::algo::compress::qsgd_encoded_bytes(n, bits, 1024, &encoded_bytes));
    std::vector<std::byte> encoded(encoded_bytes);
    const std::string dtype = "q" + std::to_string(bits);
    KernelRow enc;
    enc.name = "qsgd_enc";
    enc.dtype = dtype;
    // QSGD has scalar and AVX2 kernels; AVX-512 machines run the AVX2 ones.
    enc.simd = block::simd_level() >= block::SimdLevel::avx2 ? "avx2" : "scalar";
    enc.bytes = bytes;
    enc.time_us = median_us(flags.reps, [&] {
      must_ok(sparcoll::algo::compress::qsgd_encode(grad.data(), n, bits, 1024, 7, encoded.data(), encoded.size()));
    });
    enc.GBps = static_cast<double>(bytes) / (enc.time_us * 1e3);
    enc.ratio = enc.GBps / read_bw[0];
    rows.push_back(enc);
    KernelRow dec = enc;
    dec.name = "qsgd_dec";  // decode and add into an fp32 accumulator; GB/s of accumulator
    dec.time_us = median_us(flags.reps, [&] {
      must_ok(sparcoll::algo::compress::qsgd_decode_add(encoded.data(), encoded.size(), n, bits, 1024, acc.data()));
    });
    dec.GBps = static_cast<double>(bytes) / (dec.time_us * 1e3);
    dec.ratio = dec.GBps / read_bw[0];
    rows.push_back(dec);
  }
  g_sink = g_sink + acc[0];

  // Output.
  const std::string host = sparcoll::perf::host_name(), commit = sparcoll::perf::build_commit();
  sparcoll::perf::RunHeader header;
  header.tool = "sparcoll-perf-kernels";
  header.transport = "none";
  header.ranks = 1;
  for (int i = 1; i < argc; ++i) header.options += std::string(i > 1 ? " " : "") + argv[i];
  header.options += " | bytes " + std::to_string(bytes) + " reps " + std::to_string(flags.reps) + " block " +
                    std::to_string(kBlock) + " simd " + block::simd_level_name(block::simd_level());
  std::string error;
  auto must = [&](bool ok) {
    if (!ok) {
      std::fprintf(stderr, "sparcoll-perf-kernels: %s\n", error.c_str());
      std::exit(1);
    }
  };
  if (flags.header) {
    std::printf("%s", sparcoll::perf::header_lines(header).c_str());
    std::printf("# %-10s %-5s %8s %-7s %7s %12s %11s %9s %8s\n", "kernel", "dtype", "density", "simd", "threads", "bytes",
                "time_us", "GB/s", "vs_read");
    if (!flags.json.empty()) must(sparcoll::perf::append_text(flags.json, sparcoll::perf::header_json(header) + "\n", &error));
    if (!flags.csv.empty()) must(sparcoll::perf::append_text(flags.csv, sparcoll::perf::header_lines(header), &error));
  }
  if (!flags.csv.empty())
    must(sparcoll::perf::append_text(flags.csv, "kernel,dtype,density,simd,threads,bytes,time_us,GBps,vs_read,host,commit\n",
                                     &error));
  for (const KernelRow& r : rows) {
    char density[32] = "-";
    if (r.density >= 0) std::snprintf(density, sizeof density, "%.4f", r.density);
    std::printf("  %-10s %-5s %8s %-7s %7d %12llu %11.1f %9.2f %7.2fx\n", r.name.c_str(), r.dtype.c_str(), density,
                r.simd.c_str(), r.threads, static_cast<unsigned long long>(r.bytes), r.time_us, r.GBps, r.ratio);
    char json[1024];
    std::snprintf(json, sizeof json,
                  "{\"kind\":\"kernel\",\"name\":\"%s\",\"dtype\":\"%s\",\"density\":%s,\"simd\":\"%s\",\"threads\":%d,"
                  "\"bytes\":%llu,\"time_us_median\":%.3f,\"GBps\":%.4f,\"vs_read\":%.4f,\"host\":\"%s\",\"commit\":\"%s\"}\n",
                  r.name.c_str(), r.dtype.c_str(), r.density >= 0 ? density : "null", r.simd.c_str(), r.threads,
                  static_cast<unsigned long long>(r.bytes), r.time_us, r.GBps, r.ratio,
                  sparcoll::perf::json_escape(host).c_str(), sparcoll::perf::json_escape(commit).c_str());
    if (!flags.json.empty()) must(sparcoll::perf::append_text(flags.json, json, &error));
    char csv[512];
    std::snprintf(csv, sizeof csv, "%s,%s,%s,%s,%d,%llu,%.3f,%.4f,%.4f,%s,%s\n", r.name.c_str(), r.dtype.c_str(),
                  r.density >= 0 ? density : "", r.simd.c_str(), r.threads, static_cast<unsigned long long>(r.bytes),
                  r.time_us, r.GBps, r.ratio, host.c_str(), commit.c_str());
    if (!flags.csv.empty()) must(sparcoll::perf::append_text(flags.csv, csv, &error));
  }
  return 0;
}
