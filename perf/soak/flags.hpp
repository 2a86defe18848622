// sparcoll-soak's command line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "mix.hpp"
#include "samples.hpp"

namespace sparcoll::soak {

struct Flags {
  std::uint64_t ops = 20000;
  std::uint64_t cycles = 0;
  std::uint64_t sample_every = 0;  // 0: ops / 40
  double warmup = 0.1;             // fraction of the ops (and cycles) before the baseline sample
  Limits limits;
  std::size_t max_bytes = std::size_t{16} << 20;
  std::vector<Kind> kinds;         // empty: every kind
  int max_batch = 8;
  std::uint64_t check_every = 1;   // check the results of every Nth step (the hash covers all)
  std::uint64_t seed = 1;
  std::string json;
  bool progress = false;
  bool log_calls = false;  // rank 0 prints every call as it starts (to find what a sample caught)
  // Keep glibc's dynamic mmap threshold (see main.cpp) instead of fixing it at 128 KiB.
  bool malloc_default = false;
};

// Exits 2 with the usage on a bad flag, 0 after --help.
Flags parse_flags(int argc, char** argv);

}  // namespace sparcoll::soak
