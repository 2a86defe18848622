// parallel_ranges over tbb::parallel_for, kept in a file of its own for ThreadSanitizer.
//
// TSan sees only the synchronisation of instrumented code. Debian's libtbb is not instrumented
// (oneTBB has TSan support only when TBB itself is built with -fsanitize=thread), so TSan misses
// how TBB hands a task to a worker and how the caller's wait joins it: it reported TBB's own
// task objects (partitioner.h, blocked_range.h, inlined from TBB's headers into the caller) and
// the bitmap the workers fill as data races between the workers and the caller (75 reports in
// BlockBitmap.LargeTensorsUseEveryThreadCorrectly). They are not: TBB orders them through its
// task pool and its wait_context.
//
// So in a TSan build (meson defines SPARCOLL_TSAN_HANDOFF and compiles this file without
// -fsanitize=thread, src/block/meson.build), TBB's inlined templates here stay uninstrumented
// like the rest of TBB, and the two orderings TBB guarantees are told to TSan explicitly: the
// caller releases `start` before parallel_for and each task acquires it before calling fn; each
// task releases `done` after fn and the caller acquires it once parallel_for has returned. The
// tasks do not acquire one another's releases, so two tasks writing the same memory are still
// reported: what TSan finds in the scan afterwards is real. Suppressing TBB instead would also
// hide races in the scan's own code, which runs inside TBB's frames.
#include "block/parallel_ranges.hpp"

#include <algorithm>

#include <tbb/parallel_for.h>

#ifdef SPARCOLL_TSAN_HANDOFF
#include <sanitizer/tsan_interface.h>
#endif

namespace sparcoll::block {

void parallel_ranges(std::size_t n, std::size_t grain, unsigned threads, RangeFn fn, void* context) {
  // One task per thread, each an equal share: at most `threads` of them run at once, whatever
  // the number of TBB's workers (one per core of the host, in every process on it).
  const std::size_t min_items = std::max<std::size_t>(grain, 1);
  const std::size_t tasks = std::max<std::size_t>(1, std::min<std::size_t>(threads, (n + min_items - 1) / min_items));
  const auto range_of = [n, tasks](std::size_t t, std::size_t* begin, std::size_t* end) {
    *begin = n * t / tasks;
    *end = n * (t + 1) / tasks;
  };
#ifdef SPARCOLL_TSAN_HANDOFF
  // TSan keys synchronisation by address: these two bytes only name the two orderings.
  char start = 0, done = 0;
  __tsan_release(&start);
  tbb::parallel_for(std::size_t{0}, tasks, [&](std::size_t t) {
    __tsan_acquire(&start);
    std::size_t begin = 0, end = 0;
    range_of(t, &begin, &end);
    fn(context, begin, end);
    __tsan_release(&done);
  });
  __tsan_acquire(&done);
#else
  tbb::parallel_for(std::size_t{0}, tasks, [&](std::size_t t) {
    std::size_t begin = 0, end = 0;
    range_of(t, &begin, &end);
    fn(context, begin, end);
  });
#endif
}

}  // namespace sparcoll::block
