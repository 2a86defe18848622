// Writes a gradient trace in the file format of perf/data/README.md (version 1), the format
// scripts/make-gradient-trace writes: what the trace fuzz target and the seed generator use to
// build valid files. Header-only; needs zlib.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <string>
#include <vector>

#include "trace.hpp"

namespace sparcoll::fuzz {

class TraceBytes {
 public:
  void u32(std::uint32_t v) { put(v, 4); }
  void u64(std::uint64_t v) { put(v, 8); }
  void raw(const void* p, std::size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    bytes.insert(bytes.end(), b, b + n);
  }
  void str(const std::string& s) {
    u32(static_cast<std::uint32_t>(s.size()));
    raw(s.data(), s.size());
  }
  std::vector<unsigned char> bytes;

 private:
  void put(std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) bytes.push_back(static_cast<unsigned char>(v >> (8 * i)));
  }
};

// The file for `t` (records in step-major order, each record's blocks increasing and its values
// as many as its blocks hold). zlib level `level`, like Python's zlib.compress(raw, 9) by default.
inline std::vector<unsigned char> write_trace(const perf::GradientTrace& t, int level = 9) {
  TraceBytes out;
  out.raw("SPCTRACE", 8);
  out.u32(1);
  out.u32(t.workers);
  out.u32(t.steps);
  out.u32(t.block_elems);
  out.u64(t.elements);
  out.u32(2);  // bf16
  out.str(t.description);
  out.u32(static_cast<std::uint32_t>(t.parameters.size()));
  for (const perf::TraceParameter& p : t.parameters) {
    out.str(p.name);
    out.u64(p.offset);
    out.u64(p.count);
  }
  const std::uint64_t nblocks = (t.elements + t.block_elems - 1) / t.block_elems;
  for (std::uint32_t s = 0; s < t.steps; ++s) {
    for (std::uint32_t w = 0; w < t.workers; ++w) {
      const perf::GradientTrace::Record& rec = t.records[static_cast<std::size_t>(s) * t.workers + w];
      std::vector<unsigned char> raw((nblocks + 7) / 8, 0);
      for (std::uint32_t b : rec.blocks) raw[b / 8] |= static_cast<unsigned char>(1u << (b % 8));
      for (std::uint16_t v : rec.values) raw.push_back(static_cast<unsigned char>(v >> 8));
      for (std::uint16_t v : rec.values) raw.push_back(static_cast<unsigned char>(v & 0xff));
      uLongf packed_len = compressBound(static_cast<uLong>(raw.size()));
      std::vector<unsigned char> packed(packed_len);
      compress2(packed.data(), &packed_len, raw.data(), static_cast<uLong>(raw.size()), level);
      out.u32(s);
      out.u32(w);
      out.u32(static_cast<std::uint32_t>(rec.blocks.size()));
      out.u32(static_cast<std::uint32_t>(packed_len));
      out.raw(packed.data(), packed_len);
    }
  }
  const auto crc = static_cast<std::uint32_t>(crc32(0L, out.bytes.data(), static_cast<uInt>(out.bytes.size())));
  out.u32(crc);
  out.raw("SPCTEND\0", 8);
  return out.bytes;
}

}  // namespace sparcoll::fuzz
