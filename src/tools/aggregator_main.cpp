// sparcoll-aggregator: a dedicated aggregator process (SPARCOLL_AGGREGATORS=M mode).
// Started by sparcoll-run with SPARCOLL_ROLE=aggregator and SPARCOLL_AGGREGATOR_INDEX=i; serves
// its share of the lanes until every worker has left.
#include <cstdio>

#include "sparcoll/communicator.hpp"

int main() {
  try {
    sparcoll::Options options = sparcoll::Options::from_env();
    options.role = sparcoll::Role::aggregator;
    sparcoll::run_aggregator(options);
    return 0;
  } catch (const sparcoll::Error& e) {
    std::fprintf(stderr, "sparcoll-aggregator: %s\n", e.what());
    return 1;
  }
}
