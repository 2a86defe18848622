// Command line of sparcoll-run: what to launch and how.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "sparcoll/status.hpp"

namespace sparcoll::run {

inline constexpr int kMaxRanks = 1024;
inline constexpr int kMaxAggregators = 1024;

struct LaunchOptions {
  bool help = false;        // -h / --help: print usage and exit 0
  int ranks = 0;            // -n N
  int aggregators = 0;      // --aggregators M
  std::string transport;    // --transport NAME; empty = let the library choose
  double timeout_s = 0;     // --timeout SECONDS; 0 = no limit
  bool prefix = true;       // false with --no-prefix
  std::vector<std::pair<std::string, std::string>> env;  // --env KEY=VALUE, in order
  std::vector<std::string> command;                      // PROGRAM [ARGS...] after "--"
};

// Parses argv (argv[0] excluded from checks). On error returns invalid_argument with a message
// naming the offending argument; `out` is set only on success.
Status parse_launch_options(int argc, const char* const* argv, LaunchOptions* out);

// The usage text, ending with a newline.
const char* launch_usage();

}  // namespace sparcoll::run
