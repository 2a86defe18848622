// Non-zero block bitmaps: the block loop, the split over TBB threads (parallel_ranges.hpp), and
// the scalar kernel.
#include "block/bitmap.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <thread>

#include "block/bitmap_kernels.hpp"

#ifdef SPARCOLL_HAVE_TBB
#include "block/parallel_ranges.hpp"
#endif

namespace sparcoll::block {
namespace {

// Tensors above this size are scanned by several threads: below it, waking TBB workers costs
// more than reading the bytes (a core scans several GB/s).
constexpr std::size_t kParallelScanBytes = std::size_t{8} << 20;
// Bytes each TBB task reads at least, so tasks stay long next to their scheduling cost.
constexpr std::size_t kBytesPerTask = std::size_t{1} << 20;

// set_scan_threads' value; 0: not set, every core.
std::atomic<unsigned> scan_threads_set{0};

using AnyNonzeroFn = bool (*)(const unsigned char*, std::size_t, std::uint32_t) noexcept;

struct ScanJob {
  const unsigned char* data;
  std::size_t total_bytes;
  std::size_t block_bytes;
  std::uint32_t nonzero_mask;
  std::size_t nblocks;
};

// Fills bitmap words [first_word, end_word) in full, so threads given disjoint word ranges
// never write the same word. Bits past the last block stay zero.
//
// With `signed_zero_bits`, a block whose elements are all zero but not all +0 (some -0.0) gets
// its bit there: callers reducing in place rewrite those as +0 so every rank ends with the same
// bytes. The raw test comes first: an all-+0 block (the common case) is read once, and a
// non-zero block stops both tests at its first non-zero element.
template <AnyNonzeroFn any_nonzero>
void scan_words(const ScanJob& job, std::size_t first_word, std::size_t end_word, std::uint64_t* bits,
                std::uint64_t* signed_zero_bits) noexcept {
  for (std::size_t w = first_word; w < end_word; ++w) {
    const std::size_t first_block = w * 64;
    const std::size_t end_block = std::min(first_block + 64, job.nblocks);
    std::uint64_t word = 0, signed_zero = 0;
    for (std::size_t b = first_block; b < end_block; ++b) {
      const std::size_t offset = b * job.block_bytes;
      const std::size_t len = std::min(job.block_bytes, job.total_bytes - offset);
      const std::uint64_t bit = std::uint64_t{1} << (b - first_block);
      if (signed_zero_bits == nullptr || job.nonzero_mask == 0xffffffffu) {
        if (any_nonzero(job.data + offset, len, job.nonzero_mask)) word |= bit;
      } else if (any_nonzero(job.data + offset, len, 0xffffffffu)) {
        if (any_nonzero(job.data + offset, len, job.nonzero_mask))
          word |= bit;
        else
          signed_zero |= bit;
      }
    }
    bits[w] = word;
    if (signed_zero_bits != nullptr) signed_zero_bits[w] = signed_zero;
  }
}

using ScanWordsFn = void (*)(const ScanJob&, std::size_t, std::size_t, std::uint64_t*, std::uint64_t*) noexcept;

// One scan over TBB's threads: what each task needs (parallel_ranges passes it as a void*).
struct ParallelScan {
  const ScanJob* job;
  ScanWordsFn scan;
  std::uint64_t* bits;
  std::uint64_t* signed_zero_bits;
};

[[maybe_unused]] void scan_word_range(void* context, std::size_t first_word, std::size_t end_word) {
  const auto& p = *static_cast<const ParallelScan*>(context);
  p.scan(*p.job, first_word, end_word, p.bits, p.signed_zero_bits);
}

AnyNonzeroFn any_nonzero_for(SimdLevel level) noexcept {
  switch (level) {
#if defined(__x86_64__)
    case SimdLevel::avx512:  // no AVX-512 kernel: scan_simd_level() says why
    case SimdLevel::avx2: return any_nonzero_avx2;
#endif
    default: return any_nonzero_scalar;
  }
}

ScanWordsFn scan_words_for(SimdLevel level) noexcept {
  switch (level) {
#if defined(__x86_64__)
    case SimdLevel::avx512:
    case SimdLevel::avx2: return scan_words<any_nonzero_avx2>;
#endif
    default: return scan_words<any_nonzero_scalar>;
  }
}

}  // namespace

bool any_nonzero_scalar(const unsigned char* p, std::size_t bytes, std::uint32_t mask) noexcept {
  const std::uint64_t mask64 = (std::uint64_t{mask} << 32) | mask;
  std::size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, p + i, 8);
    if (w & mask64) return true;
  }
  if (i + 4 <= bytes) {
    std::uint32_t w;
    std::memcpy(&w, p + i, 4);
    if (w & mask) return true;
    i += 4;
  }
  if (i + 2 <= bytes) {
    std::uint16_t w;
    std::memcpy(&w, p + i, 2);
    if (w & static_cast<std::uint16_t>(mask)) return true;
  }
  return false;
}

std::size_t scan_nonzero_blocks_at(SimdLevel level, const void* data, std::size_t count, DataType dtype,
                                   std::uint32_t block_elems, std::uint64_t* bits,
                                   std::uint64_t* signed_zero_bits) noexcept {
  if (block_elems == 0) return 0;  // no block geometry: there are no blocks to describe
  const std::size_t esize = dtype_size(dtype);
  const std::size_t nblocks = block_count(count, block_elems);
  const std::size_t nwords = bitmap_words(nblocks);
  if (esize == 0) {  // unknown dtype: report nothing to send rather than read past the tensor
    std::fill_n(bits, nwords, std::uint64_t{0});
    if (signed_zero_bits != nullptr) std::fill_n(signed_zero_bits, nwords, std::uint64_t{0});
    return 0;
  }
  const ScanJob job{static_cast<const unsigned char*>(data), count * esize, block_elems * esize, nonzero_mask(dtype),
                    nblocks};
  const ScanWordsFn scan = scan_words_for(level);
#ifdef SPARCOLL_HAVE_TBB
  const unsigned threads = scan_threads();
  if (threads > 1 && job.total_bytes > kParallelScanBytes && nwords > 1) {
    const std::size_t grain = std::max<std::size_t>(1, kBytesPerTask / (job.block_bytes * 64));
    ParallelScan parallel{&job, scan, bits, signed_zero_bits};
    parallel_ranges(nwords, grain, threads, scan_word_range, &parallel);
  } else {
    scan(job, 0, nwords, bits, signed_zero_bits);
  }
#else
  scan(job, 0, nwords, bits, signed_zero_bits);
#endif
  std::size_t nonzero = 0;
  for (std::size_t w = 0; w < nwords; ++w) nonzero += static_cast<std::size_t>(std::popcount(bits[w]));
  return nonzero;
}

void set_scan_threads(unsigned threads) noexcept {
  scan_threads_set.store(std::max(threads, 1u), std::memory_order_relaxed);
}

unsigned scan_threads() noexcept {
  const unsigned set = scan_threads_set.load(std::memory_order_relaxed);
  if (set != 0) return set;
  // Read once: every call asks the kernel again (a system call or a read of /sys).
  static const unsigned cores = std::max(std::thread::hardware_concurrency(), 1u);
  return cores;
}

bool is_zero_at(SimdLevel level, const void* data, std::size_t n, DataType dtype) noexcept {
  const std::size_t esize = dtype_size(dtype);
  if (esize == 0) return true;
  return !any_nonzero_for(level)(static_cast<const unsigned char*>(data), n * esize, nonzero_mask(dtype));
}

// The scan reads memory once and tests it; AVX2's two 32-byte loads a cycle already ask for more
// than memory gives one core, so wider vectors cannot shorten a scan of a tensor that is not in
// the caches, and the scan has no AVX-512 kernel. Measured on this project's host (AMD EPYC, 100
// MiB, one core, through this file's block loop): an AVX-512 kernel read 22-28 GB/s against
// AVX2's 34-37, from 64-byte aligned data as from a malloc'd buffer's (16 bytes past a page
// boundary, where every 64-byte load spans two cache lines), and a 2-rank 100 MiB allreduce over
// shm at 0-1% density took 1.2-1.3x the time with it; it was faster only on data in the caches,
// where a scan takes microseconds (docs/perf-log.md, "The scan's loads").
SimdLevel scan_simd_level() noexcept {
  return simd_level() >= SimdLevel::avx2 ? SimdLevel::avx2 : simd_level();
}

std::size_t scan_nonzero_blocks(const void* data, std::size_t count, DataType dtype, std::uint32_t block_elems,
                                std::uint64_t* bits, std::uint64_t* signed_zero_bits) {
  return scan_nonzero_blocks_at(scan_simd_level(), data, count, dtype, block_elems, bits, signed_zero_bits);
}

bool is_zero(const void* data, std::size_t n, DataType dtype) { return is_zero_at(scan_simd_level(), data, n, dtype); }

}  // namespace sparcoll::block
