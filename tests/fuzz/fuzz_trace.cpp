// Fuzz target: the gradient trace reader (perf/lib/trace.cpp, load_trace_bytes and
// trace_gradient), which reads files in the format of perf/data/README.md: a header, a
// parameter table, zlib-compressed records, a CRC-32 and an end marker.
//
// 1. The input, as a file, twice: as it is, and with its CRC-32 field recomputed over its body
//    (a mutated body would otherwise almost always stop at the checksum, and the structure
//    behind it would go untested).
// 2. The same bytes as choices for a trace (shape, parameters, non-zero blocks, values) written
//    with trace_writer.hpp; sometimes with one lie in it (a count, an order, a length, a bitmap
//    or payload that disagrees with its header) that the reader must catch.
// Checks: a refused file leaves the output empty and says what is wrong, naming the file; an
// accepted one is consistent (parameters contiguous over the elements, each record's blocks
// increasing and in range with exactly their values, trace_gradient expanding them in place),
// and writing it again and reading that back gives the same trace. A valid file built in 2 is
// read back exactly as written. The reader must never allocate more than the input justifies
// (libFuzzer's malloc limit turns that into a crash).
#include <fuzzer/FuzzedDataProvider.h>
#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_check.hpp"
#include "trace.hpp"
#include "trace_writer.hpp"

namespace sparcoll::fuzz {
namespace {

using perf::GradientTrace;

constexpr char kName[] = "fuzz.sgtrace";

bool same(const GradientTrace& a, const GradientTrace& b) {
  if (a.workers != b.workers || a.steps != b.steps || a.elements != b.elements || a.description != b.description ||
      a.block_elems != b.block_elems || a.parameters.size() != b.parameters.size() || a.records.size() != b.records.size())
    return false;
  for (std::size_t i = 0; i < a.parameters.size(); ++i)
    if (a.parameters[i].name != b.parameters[i].name || a.parameters[i].offset != b.parameters[i].offset ||
        a.parameters[i].count != b.parameters[i].count)
      return false;
  for (std::size_t i = 0; i < a.records.size(); ++i)
    if (a.records[i].blocks != b.records[i].blocks || a.records[i].values != b.records[i].values) return false;
  return true;
}

void check_loaded(const GradientTrace& t) {
  FUZZ_CHECK(t.workers >= 1 && t.workers <= 65536 && t.steps >= 1 && t.steps <= 65536);
  FUZZ_CHECK(t.block_elems >= 1 && t.block_elems <= (1u << 20));
  FUZZ_CHECK(t.elements >= 1 && t.elements <= (std::uint64_t{1} << 36));
  FUZZ_CHECK(t.records.size() == std::size_t{t.workers} * t.steps);
  std::uint64_t next = 0;
  for (const perf::TraceParameter& p : t.parameters) {
    FUZZ_CHECK(p.offset == next && p.count <= t.elements - next);
    next += p.count;
  }
  FUZZ_CHECK(t.parameters.empty() || next == t.elements);
  const std::uint64_t nblocks = (t.elements + t.block_elems - 1) / t.block_elems;
  for (const GradientTrace::Record& rec : t.records) {
    std::uint64_t values = 0;
    for (std::size_t i = 0; i < rec.blocks.size(); ++i) {
      FUZZ_CHECK(rec.blocks[i] < nblocks && (i == 0 || rec.blocks[i] > rec.blocks[i - 1]));
      values += std::min<std::uint64_t>(t.block_elems, t.elements - std::uint64_t{rec.blocks[i]} * t.block_elems);
    }
    FUZZ_CHECK(rec.values.size() == values);
  }
  // Expanding a record writes its values at its blocks and zeros elsewhere (small tensors only:
  // the dense gradient has `elements` floats).
  if (t.elements > (1u << 16)) return;
  for (const std::uint32_t w : {0u, t.workers - 1}) {
    std::vector<float> dense;
    perf::trace_gradient(t, w, t.steps - 1, &dense);
    FUZZ_CHECK(dense.size() == t.elements);
    const GradientTrace::Record& rec = t.records[std::size_t{t.steps - 1} * t.workers + w];
    std::size_t v = 0, nonzero_slots = 0;
    for (const std::uint32_t b : rec.blocks) {
      const std::uint64_t base = std::uint64_t{b} * t.block_elems;
      const std::uint64_t len = std::min<std::uint64_t>(t.block_elems, t.elements - base);
      for (std::uint64_t i = 0; i < len; ++i, ++v)
        FUZZ_CHECK(std::bit_cast<std::uint32_t>(dense[base + i]) == std::uint32_t{rec.values[v]} << 16);
      nonzero_slots += len;
    }
    std::size_t zeros = 0;
    for (const float x : dense) zeros += std::bit_cast<std::uint32_t>(x) == 0;
    FUZZ_CHECK(zeros + nonzero_slots >= dense.size());
  }
}

void load(const std::vector<unsigned char>& file) {
  GradientTrace t;
  std::string error;
  if (!perf::load_trace_bytes(file, kName, &t, &error)) {
    FUZZ_CHECK(error.rfind(std::string("gradient trace ") + kName + ": ", 0) == 0 && error.size() > 30);
    FUZZ_CHECK(t.workers == 0 && t.records.empty() && t.parameters.empty());
    return;
  }
  FUZZ_CHECK(error.empty());
  check_loaded(t);
  // Written again (with another compression level) and read back: the same trace.
  GradientTrace again;
  FUZZ_CHECK(perf::load_trace_bytes(write_trace(t, 1), kName, &again, &error));
  FUZZ_CHECK(same(t, again));
}

void load_with_fixed_crc(const std::uint8_t* data, std::size_t size) {
  if (size < 8 + 12) return;
  std::vector<unsigned char> file(data, data + size);
  const std::size_t body = size - 12;
  const auto crc = static_cast<std::uint32_t>(crc32(0L, file.data(), static_cast<uInt>(body)));
  for (int i = 0; i < 4; ++i) file[body + i] = static_cast<unsigned char>(crc >> (8 * i));
  load(file);
}

// A trace from the fuzzer's choices, small enough to write quickly.
GradientTrace choose_trace(FuzzedDataProvider& in) {
  GradientTrace t;
  t.workers = in.ConsumeIntegralInRange<std::uint32_t>(1, 3);
  t.steps = in.ConsumeIntegralInRange<std::uint32_t>(1, 3);
  t.block_elems = in.ConsumeIntegralInRange<std::uint32_t>(1, 64);
  t.elements = in.ConsumeIntegralInRange<std::uint64_t>(1, 2000);
  t.description = in.ConsumeRandomLengthString(64);
  const int nparams = in.ConsumeIntegralInRange<int>(0, 4);
  std::uint64_t at = 0;
  for (int i = 0; i < nparams && at < t.elements; ++i) {
    perf::TraceParameter p;
    p.name = in.ConsumeRandomLengthString(16);
    p.offset = at;
    p.count = i + 1 == nparams ? t.elements - at : in.ConsumeIntegralInRange<std::uint64_t>(0, t.elements - at);
    at += p.count;
    t.parameters.push_back(p);
  }
  if (!t.parameters.empty()) t.parameters.back().count += t.elements - at;
  const std::uint64_t nblocks = (t.elements + t.block_elems - 1) / t.block_elems;
  t.records.resize(std::size_t{t.workers} * t.steps);
  for (GradientTrace::Record& rec : t.records) {
    for (std::uint64_t b = 0; b < nblocks; ++b) {
      if (!in.ConsumeBool()) continue;
      rec.blocks.push_back(static_cast<std::uint32_t>(b));
      const std::uint64_t len = std::min<std::uint64_t>(t.block_elems, t.elements - b * t.block_elems);
      for (std::uint64_t i = 0; i < len; ++i) rec.values.push_back(in.ConsumeIntegral<std::uint16_t>());
    }
  }
  return t;
}

// Rewrites one u32 or u64 field of a written file to `value` and fixes the CRC: a lie the
// reader must catch (or, when the value happens to be the right one, accept consistently).
std::vector<unsigned char> with_lie(std::vector<unsigned char> file, FuzzedDataProvider& in) {
  const std::size_t body = file.size() - 12;
  const std::size_t at = in.ConsumeIntegralInRange<std::size_t>(8, body - 4);
  const int width = in.ConsumeBool() ? 4 : 8;
  const std::uint64_t value = in.ConsumeIntegral<std::uint64_t>();
  for (int i = 0; i < width && at + i < body; ++i) file[at + i] = static_cast<unsigned char>(value >> (8 * i));
  const auto crc = static_cast<std::uint32_t>(crc32(0L, file.data(), static_cast<uInt>(body)));
  for (int i = 0; i < 4; ++i) file[body + i] = static_cast<unsigned char>(crc >> (8 * i));
  return file;
}

void round_trip(FuzzedDataProvider& in) {
  const GradientTrace t = choose_trace(in);
  const std::vector<unsigned char> file = write_trace(t);
  GradientTrace back;
  std::string error;
  if (!perf::load_trace_bytes(file, kName, &back, &error)) {
    std::fprintf(stderr, "fuzz: a valid trace was refused: %s\n", error.c_str());
    FUZZ_CHECK(false);
  }
  FUZZ_CHECK(same(t, back));
  check_loaded(back);
  if (in.remaining_bytes() > 0) load(with_lie(file, in));
}

}  // namespace
}  // namespace sparcoll::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  sparcoll::fuzz::load(std::vector<unsigned char>(data, data + size));
  sparcoll::fuzz::load_with_fixed_crc(data, size);
  FuzzedDataProvider in(data, size);
  sparcoll::fuzz::round_trip(in);
  return 0;
}
