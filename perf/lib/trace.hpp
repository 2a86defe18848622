// Recorded gradients for replay: per (worker, step), the full flattened gradient of a real
// training run, stored as its non-zero 256-element blocks (format: perf/data/README.md, written
// by scripts/make-gradient-trace). The whole file is read, checked (CRC-32, structure, zlib
// streams) and inflated by load_trace; trace_gradient then only expands one record.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sparcoll::perf {

// One model parameter's range in the flattened gradient.
struct TraceParameter {
  std::string name;
  std::uint64_t offset = 0, count = 0;
};

struct GradientTrace {
  std::uint32_t workers = 0, steps = 0;
  std::uint64_t elements = 0;
  std::string description;

  // Read-only details of the file (filled by load_trace).
  std::uint32_t block_elems = 0;             // block size the file was cut into (256)
  std::vector<TraceParameter> parameters;    // in flattened order
  // Per record (index step * workers + worker): the non-zero blocks in increasing order, and the
  // bf16 bits of their values (block_elems per block; the last block of the tensor is shorter).
  struct Record {
    std::vector<std::uint32_t> blocks;
    std::vector<std::uint16_t> values;
  };
  std::vector<Record> records;
};

// Reads and checks a trace file; on failure returns false with a message naming the file and
// what is wrong (missing, truncated, checksum mismatch, bad structure), *out left empty.
bool load_trace(const std::string& path, GradientTrace* out, std::string* error);
// The same checks on a file's bytes already in memory; `name` stands for the file in errors.
bool load_trace_bytes(const std::vector<unsigned char>& bytes, const std::string& name, GradientTrace* out,
                      std::string* error);

// Dense fp32 gradient of `worker` at `step` (the recorded bf16 values, exactly; zeros where no
// block is stored); *out is resized to trace.elements. Throws std::out_of_range when worker or
// step is not in the trace.
void trace_gradient(const GradientTrace& trace, std::uint32_t worker, std::uint32_t step, std::vector<float>* out);

}  // namespace sparcoll::perf
