// Runs a function over disjoint sub-ranges of [0, n) on TBB's threads (the bitmap scan of large
// tensors). Internal to src/block; built only with TBB (SPARCOLL_HAVE_TBB).
#pragma once

#include <cstddef>

namespace sparcoll::block {

using RangeFn = void (*)(void* context, std::size_t begin, std::size_t end);

// Calls fn(context, begin, end) over sub-ranges of [0, n), covering each index once, on at most
// `threads` threads (TBB's workers and the caller's): equal ranges, one per thread but no more
// than n / grain rounded up (each about `grain` items or more); returns when every call has
// returned. Everything the caller did before happens-before each call, and each call
// happens-before the return, also as ThreadSanitizer sees it (parallel_ranges.cpp says how).
void parallel_ranges(std::size_t n, std::size_t grain, unsigned threads, RangeFn fn, void* context);

}  // namespace sparcoll::block
