#include "tools/run_options.hpp"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include "tools/run_environment.hpp"

namespace sparcoll::run {
namespace {

Status usage_error(std::string message) { return Status(ErrorCode::invalid_argument, std::move(message)); }

// Whole-string integer in [min, max]; from_chars rejects signs, spaces and trailing junk.
bool parse_int(std::string_view text, int min, int max, int* out) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < min || value > max) return false;
  *out = value;
  return true;
}

// Seconds may be fractional ("0.5") so tests can use short limits.
bool parse_seconds(const std::string& text, double* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (*end != '\0' || !std::isfinite(value) || value <= 0) return false;
  *out = value;
  return true;
}

// Splits "--flag=value" into flag and value; "--flag value" takes the next argument.
class ArgCursor {
 public:
  ArgCursor(int argc, const char* const* argv) : argc_(argc), argv_(argv) {}

  bool done() const { return index_ >= argc_; }
  std::string_view peek() const { return argv_[index_]; }
  int index() const { return index_; }
  void advance() { ++index_; }

  // The value of the flag at the cursor, consuming it (and the next argument if needed).
  Status take_value(std::string_view flag, std::string* value) {
    std::string_view arg = argv_[index_];
    ++index_;
    if (arg.size() > flag.size() && arg[flag.size()] == '=') {
      *value = std::string(arg.substr(flag.size() + 1));
      return Status::Ok();
    }
    if (index_ >= argc_) return usage_error(std::string(flag) + " needs a value");
    *value = argv_[index_];
    ++index_;
    return Status::Ok();
  }

 private:
  int argc_;
  const char* const* argv_;
  int index_ = 1;
};

// True for "--flag" and "--flag=...".
bool is_flag(std::string_view arg, std::string_view flag) {
  return arg.substr(0, flag.size()) == flag && (arg.size() == flag.size() || arg[flag.size()] == '=');
}

Status parse_env_assignment(const std::string& text, LaunchOptions* options) {
  std::size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    return usage_error("--env " + text + ": expected KEY=VALUE");
  std::string key = text.substr(0, eq);
  if (is_launcher_variable(key))
    return usage_error("--env " + key + ": sparcoll-run sets this variable itself (see docs/launcher.md)");
  options->env.emplace_back(key, text.substr(eq + 1));
  return Status::Ok();
}

}  // namespace

Status parse_launch_options(int argc, const char* const* argv, LaunchOptions* out) {
  LaunchOptions options;
  ArgCursor cursor(argc, argv);
  bool have_ranks = false;
  bool have_separator = false;
  while (!cursor.done()) {
    std::string_view arg = cursor.peek();
    std::string value;
    if (arg == "--") {
      cursor.advance();
      have_separator = true;
      break;
    }
    if (arg == "-h" || arg == "--help") {
      options.help = true;
      cursor.advance();
    } else if (arg == "-n") {
      Status st = cursor.take_value("-n", &value);
      if (!st.ok()) return st;
      if (!parse_int(value, 1, kMaxRanks, &options.ranks))
        return usage_error("-n " + value + ": expected a number of ranks from 1 to " + std::to_string(kMaxRanks));
      have_ranks = true;
    } else if (is_flag(arg, "--aggregators")) {
      Status st = cursor.take_value("--aggregators", &value);
      if (!st.ok()) return st;
      if (!parse_int(value, 0, kMaxAggregators, &options.aggregators))
        return usage_error("--aggregators " + value + ": expected a number from 0 to " +
                           std::to_string(kMaxAggregators));
    } else if (is_flag(arg, "--transport")) {
      Status st = cursor.take_value("--transport", &value);
      if (!st.ok()) return st;
      if (value.empty()) return usage_error("--transport: expected a transport name");
      options.transport = value;
    } else if (is_flag(arg, "--timeout")) {
      Status st = cursor.take_value("--timeout", &value);
      if (!st.ok()) return st;
      if (!parse_seconds(value, &options.timeout_s))
        return usage_error("--timeout " + value + ": expected a positive number of seconds");
    } else if (is_flag(arg, "--env")) {
      Status st = cursor.take_value("--env", &value);
      if (!st.ok()) return st;
      st = parse_env_assignment(value, &options);
      if (!st.ok()) return st;
    } else if (arg == "--no-prefix") {
      options.prefix = false;
      cursor.advance();
    } else if (!arg.empty() && arg[0] == '-') {
      return usage_error("unknown option " + std::string(arg));
    } else {
      return usage_error("unexpected argument " + std::string(arg) + " (the program goes after --)");
    }
  }
  if (options.help) {
    *out = std::move(options);
    return Status::Ok();
  }
  if (!have_ranks) return usage_error("missing -n N (the number of ranks)");
  if (!have_separator) return usage_error("missing -- before the program");
  for (; !cursor.done(); cursor.advance()) options.command.emplace_back(cursor.peek());
  if (options.command.empty()) return usage_error("missing program after --");
  *out = std::move(options);
  return Status::Ok();
}

const char* launch_usage() {
  return "usage: sparcoll-run -n N [--aggregators M] [--transport NAME] [--timeout SECONDS]\n"
         "                    [--env KEY=VALUE]... [--no-prefix] -- PROGRAM [ARGS...]\n"
         "\n"
         "Starts N ranks of PROGRAM (and M sparcoll-aggregator processes) on this host, hosts\n"
         "their rendezvous store, and forwards their output prefixed with \"[rank] \".\n"
         "\n"
         "  -n N                 number of ranks, 1 to 1024\n"
         "  --aggregators M      dedicated aggregator processes to start (default 0)\n"
         "  --transport NAME     sets SPARCOLL_TRANSPORT for every process\n"
         "  --timeout SECONDS    kill everything and exit 124 after this long\n"
         "  --env KEY=VALUE      extra environment variable for every process (repeatable)\n"
         "  --no-prefix          forward output without the \"[i] \" prefixes\n"
         "  -h, --help           print this help\n"
         "\n"
         "Exit status: 0 when every process exits 0; otherwise the first failure's exit code\n"
         "(128+signal if it was killed), 124 on timeout, 2 on bad usage. See docs/launcher.md.\n";
}

}  // namespace sparcoll::run
