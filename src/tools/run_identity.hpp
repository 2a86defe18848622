// Who a launched process is: rank i or aggregator j. Used for environments, prefixes and messages.
#pragma once

#include <string>

namespace sparcoll::run {

struct ChildIdentity {
  enum class Kind { rank, aggregator };
  Kind kind = Kind::rank;
  int index = 0;

  bool is_aggregator() const { return kind == Kind::aggregator; }
  // "rank 2", "aggregator 0": for launcher messages.
  std::string name() const { return (is_aggregator() ? "aggregator " : "rank ") + std::to_string(index); }
  // "[2] ", "[agg 0] ": put before every forwarded output line.
  std::string prefix() const { return (is_aggregator() ? "[agg " : "[") + std::to_string(index) + "] "; }
};

}  // namespace sparcoll::run
