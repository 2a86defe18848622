// Runs the soak's steps on a communicator: starts every call of a step (the non-blocking ones stay
// in flight together), completes them in order and checks their results (calls.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "calls.hpp"
#include "mix.hpp"

namespace sparcoll::soak {

class Runner {
 public:
  // Sizes every buffer for calls of up to `max_bytes` and batches of up to `max_batch` calls.
  Runner(Communicator& comm, std::size_t max_bytes, int max_batch);
  // "" when every call of the step gave the right result (always "" for unchecked results), else
  // what was wrong. Throws sparcoll::Error when a good call fails.
  std::string run(const Step& step, bool check);
  // The running hash of every result that must be identical on every rank.
  std::uint64_t hash() const { return ctx_.hash; }
  std::size_t tensors() const { return tensors_.size(); }
  int faults() const { return fault_count(ctx_.world); }

 private:
  Context ctx_;
  std::vector<Slot> slots_;
  std::vector<CompressedTensor> tensors_;
};

}  // namespace sparcoll::soak
