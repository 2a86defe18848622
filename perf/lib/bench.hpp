// The measurement loop shared by sparcoll-perf and the peers: for every point of a sweep
// (pattern x dtype x density x size), generate the same seeded data on every rank, warm up,
// time many in-place allreduces (each after a barrier; an iteration's time is the slowest
// rank's), check the last result element by element against an independent reference, and
// print / append one row. Each program only wraps its collective library in a Collective.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "report.hpp"
#include "sparcoll/types.hpp"
#include "sweep.hpp"

namespace sparcoll::perf {

class Collective {
 public:
  virtual ~Collective() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual void barrier() = 0;
  // Called once per point, before any allreduce on `buffer` (gloo binds its algorithm to it).
  virtual void prepare(void* /*buffer*/, std::size_t /*count*/, DataType /*dtype*/, ReduceOp /*op*/) {}
  // The timed operation: every rank's `send` reduced into `recv` (send == recv: in place).
  virtual void allreduce(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op) = 0;
  // Untimed helpers: element-wise max / sum over ranks, in place, result on every rank.
  virtual void max_f64(double* values, std::size_t n) = 0;
  virtual void sum_u64(std::uint64_t* values, std::size_t n) = 0;
  // Bytes this rank has sent and received through its transport so far; false: not measurable,
  // model_traffic() gives the dense algorithm's per-rank bytes for one allreduce instead.
  virtual bool traffic(std::uint64_t* /*sent*/, std::uint64_t* /*received*/) { return false; }
  virtual void model_traffic(std::uint64_t /*bytes*/, double* sent, double* received) const {
    *sent = *received = 0;
  }
  // True when results are reduced in rank order with an fp32 accumulator (bitwise equal to the
  // reference whatever the data). Otherwise a trace's fp32 sums may round differently and are
  // checked against the reference within the bound of a different order of additions.
  virtual bool rank_order() const { return false; }
  // The algorithm the last allreduce ran when the system chose it itself (sparcoll's auto), else "".
  virtual std::string ran_algorithm() const { return std::string(); }
  // False for a timed operation that is not an allreduce (the read floor): its output is not checked.
  virtual bool computes_allreduce() const { return true; }
};

struct SweepRun {
  ResultRow identity;          // system, algo, transport, aggregators; the rest is filled per point
  RunHeader header;
  std::uint32_t default_block = 256;  // when options.blocks is empty
  bool out_of_place = false;
  const char* program = "sparcoll-perf";  // prefix of error messages
};

// Whether this build replays gradient traces (perf/lib/trace.cpp was present at configure time).
bool trace_supported();

// Runs every point; returns the number of wrong elements over all points and ranks (0: all
// correct). Throws std::runtime_error for bad input found at run time (a trace file that does
// not load, an output file that cannot be written), whatever the collective throws otherwise.
std::uint64_t run_sweep(Collective& collective, const SweepOptions& options, const SweepRun& run);

// The same with several collectives (one run each) measured call by call: at every point they
// take turns, one call each per iteration in an order drawn anew every time (the same on every
// rank), all with the same number of timed calls (a time budget is per collective); one row
// each. For comparing algorithms on a host whose speed drifts: run one after the other, each
// algorithm's calls meet different moments of the host. The header printed is the first run's.
std::uint64_t run_sweep(std::span<Collective* const> collectives, const SweepOptions& options,
                        std::span<const SweepRun> runs);

}  // namespace sparcoll::perf
