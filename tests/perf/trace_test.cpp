// The stored gradient trace (perf/data/lstm-lm.sgtrace, perf/data/README.md) loads, has the shape
// and densities its README states, and damaged copies fail with clear errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "trace.hpp"

#if __has_include(<zlib.h>)
#include <zlib.h>
#endif

namespace {

using sparcoll::perf::GradientTrace;

// From perf/data/README.md (the output of scripts/make-gradient-trace, 4 decimals).
constexpr std::uint32_t kWorkers = 4, kSteps = 20;
constexpr std::uint64_t kElements = 225459;
constexpr double kElementDensity = 0.1188, kBlockDensity = 0.2658, kUnionBlockDensity = 0.4922;
struct ParamDensity {
  const char* name;
  std::uint64_t count;
  double element, block;
};
constexpr ParamDensity kParams[] = {
    {"embedding.weight", 140480, 0.0610, 0.1614}, {"lstm.weight_ih_l0", 8192, 1.0, 1.0},
    {"lstm.weight_hh_l0", 4096, 1.0, 1.0},         {"lstm.bias_ih_l0", 128, 1.0, 1.0},
    {"lstm.bias_hh_l0", 128, 1.0, 1.0},            {"decoder.weight", 70240, 0.0782, 0.3187},
    {"decoder.bias", 2195, 0.0782, 0.9625},
};
constexpr double kRounding = 0.5e-4 + 1e-9;

std::string trace_path() { return std::string(SPARCOLL_SOURCE_DIR) + "/perf/data/lstm-lm.sgtrace"; }

std::vector<char> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class TempDir {
 public:
  TempDir() {
    std::string pattern = ::testing::TempDir() + "sparcoll-trace-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::string write(const std::string& name, const std::vector<char>& bytes) const {
    const std::string p = path_ + "/" + name;
    std::ofstream(p, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return p;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// CRC-32 (IEEE, as zlib's crc32), to re-seal files whose structure the tests damage on purpose.
std::uint32_t crc32(const char* p, std::size_t n) {
  std::uint32_t c = 0xFFFFFFFFu;
  for (std::size_t i = 0; i < n; ++i) {
    c ^= static_cast<unsigned char>(p[i]);
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}
void reseal(std::vector<char>* f) {
  const std::size_t body = f->size() - 12;
  const std::uint32_t c = crc32(f->data(), body);
  for (int i = 0; i < 4; ++i) (*f)[body + i] = static_cast<char>(c >> (8 * i));
}

// Byte offset of the first record header (just after the parameter table).
std::size_t first_record(const GradientTrace& t) {
  std::size_t at = 8 + 4 * 4 + 8 + 4 + 4 + t.description.size() + 4;
  for (const auto& p : t.parameters) at += 4 + p.name.size() + 16;
  return at;
}

class StoredTrace : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    trace_ = new GradientTrace;
    std::string error;
    loaded_ = sparcoll::perf::load_trace(trace_path(), trace_, &error);
    error_ = new std::string(error);
  }
  static void TearDownTestSuite() {
    delete trace_;
    delete error_;
  }
  void SetUp() override {
    if (!loaded_ && error_->find("without zlib") != std::string::npos) GTEST_SKIP() << *error_;
    ASSERT_TRUE(loaded_) << *error_;
  }
  static GradientTrace* trace_;
  static std::string* error_;
  static bool loaded_;
};
GradientTrace* StoredTrace::trace_ = nullptr;
std::string* StoredTrace::error_ = nullptr;
bool StoredTrace::loaded_ = false;

TEST_F(StoredTrace, ShapeMatchesTheReadme) {
  const GradientTrace& t = *trace_;
  EXPECT_EQ(t.workers, kWorkers);
  EXPECT_EQ(t.steps, kSteps);
  EXPECT_EQ(t.elements, kElements);
  EXPECT_EQ(t.block_elems, 256u);
  EXPECT_NE(t.description.find("LSTM"), std::string::npos) << t.description;
  ASSERT_EQ(t.parameters.size(), std::size(kParams));
  for (std::size_t i = 0; i < t.parameters.size(); ++i) {
    EXPECT_EQ(t.parameters[i].name, kParams[i].name);
    EXPECT_EQ(t.parameters[i].count, kParams[i].count) << kParams[i].name;
  }
}

TEST_F(StoredTrace, DensitiesMatchTheReadme) {
  const GradientTrace& t = *trace_;
  const std::uint32_t B = t.block_elems;
  const std::size_t nblocks = static_cast<std::size_t>((t.elements + B - 1) / B);
  std::vector<double> param_elem(t.parameters.size()), param_block(t.parameters.size());
  double elem = 0, block = 0, union_block = 0;
  std::vector<float> g;
  for (std::uint32_t s = 0; s < t.steps; ++s) {
    std::vector<bool> step_union(nblocks);
    for (std::uint32_t w = 0; w < t.workers; ++w) {
      sparcoll::perf::trace_gradient(t, w, s, &g);
      ASSERT_EQ(g.size(), t.elements);
      std::vector<bool> nz_block(nblocks);
      std::uint64_t nz = 0;
      for (std::size_t i = 0; i < g.size(); ++i) {
        if (g[i] == 0.0f) continue;
        ++nz;
        nz_block[i / B] = true;
        // bf16 values, exactly: the low 16 bits of every replayed fp32 are zero.
        ASSERT_EQ(std::bit_cast<std::uint32_t>(g[i]) & 0xFFFFu, 0u) << i;
      }
      const auto nzb = std::count(nz_block.begin(), nz_block.end(), true);
      EXPECT_EQ(static_cast<std::size_t>(nzb), t.records[s * t.workers + w].blocks.size());
      elem += static_cast<double>(nz) / static_cast<double>(t.elements);
      block += static_cast<double>(nzb) / static_cast<double>(nblocks);
      for (std::size_t b = 0; b < nblocks; ++b) step_union[b] = step_union[b] || nz_block[b];
      for (std::size_t p = 0; p < t.parameters.size(); ++p) {
        const auto& par = t.parameters[p];
        std::uint64_t pnz = 0, pblocks = 0, pnzb = 0;
        for (std::uint64_t b = par.offset / B; b * B < par.offset + par.count; ++b) {
          ++pblocks;
          bool any = false;
          for (std::uint64_t i = std::max(b * B, par.offset); i < std::min((b + 1) * B, par.offset + par.count); ++i)
            if (g[i] != 0.0f) ++pnz, any = true;
          pnzb += any;
        }
        param_elem[p] += static_cast<double>(pnz) / static_cast<double>(par.count);
        param_block[p] += static_cast<double>(pnzb) / static_cast<double>(pblocks);
      }
    }
    union_block += static_cast<double>(std::count(step_union.begin(), step_union.end(), true)) / nblocks;
  }
  const double records = static_cast<double>(t.workers) * t.steps;
  EXPECT_NEAR(elem / records, kElementDensity, kRounding);
  EXPECT_NEAR(block / records, kBlockDensity, kRounding);
  EXPECT_NEAR(union_block / t.steps, kUnionBlockDensity, kRounding);
  for (std::size_t p = 0; p < t.parameters.size(); ++p) {
    EXPECT_NEAR(param_elem[p] / records, kParams[p].element, kRounding) << kParams[p].name;
    EXPECT_NEAR(param_block[p] / records, kParams[p].block, kRounding) << kParams[p].name;
  }
}

TEST_F(StoredTrace, WorkersAndStepsDiffer) {
  const GradientTrace& t = *trace_;
  std::vector<float> a, b;
  for (std::uint32_t s = 0; s < t.steps; ++s) {
    sparcoll::perf::trace_gradient(t, 0, s, &a);
    for (std::uint32_t w = 1; w < t.workers; ++w) {
      sparcoll::perf::trace_gradient(t, w, s, &b);
      EXPECT_NE(a, b) << "step " << s << ": worker 0 and worker " << w << " replay the same gradient";
      // Different batches touch different embedding rows: the block sets differ, not only values.
      EXPECT_NE(t.records[s * t.workers].blocks, t.records[s * t.workers + w].blocks) << "step " << s;
    }
  }
  sparcoll::perf::trace_gradient(t, 1, 0, &a);
  sparcoll::perf::trace_gradient(t, 1, 1, &b);
  EXPECT_NE(a, b);
  EXPECT_THROW(sparcoll::perf::trace_gradient(t, t.workers, 0, &a), std::out_of_range);
  EXPECT_THROW(sparcoll::perf::trace_gradient(t, 0, t.steps, &a), std::out_of_range);
}

// The stored recommendation-model trace (perf/data/rec-dlrm.sgtrace, made by
// scripts/make-gradient-trace --model rec): 8 workers x 2 steps of a 27.2 M-parameter model in
// DDP's parameter order, with the overall densities perf/data/README.md states.
TEST(StoredRecTrace, ShapeOrderAndDensitiesMatchTheReadme) {
  GradientTrace t;
  std::string error;
  const bool ok = sparcoll::perf::load_trace(std::string(SPARCOLL_SOURCE_DIR) + "/perf/data/rec-dlrm.sgtrace", &t, &error);
  if (!ok && error.find("without zlib") != std::string::npos) GTEST_SKIP() << error;
  ASSERT_TRUE(ok) << error;
  EXPECT_EQ(t.workers, 8u);
  EXPECT_EQ(t.steps, 2u);
  EXPECT_EQ(t.elements, 27197329u);
  EXPECT_EQ(t.block_elems, 256u);
  EXPECT_NE(t.description.find("DDP buckets (parameter index ranges): [0,8) [8,13) [13,14) [14,20)"),
            std::string::npos) << t.description;
  ASSERT_EQ(t.parameters.size(), 20u);
  // DDP's order: the top MLP's last layer first, the bottom MLP's first layer last.
  EXPECT_EQ(t.parameters.front().name, "top.4.bias");
  EXPECT_EQ(t.parameters[13].name, "embeddings.0.weight");
  EXPECT_EQ(t.parameters[13].count, 16000000u);
  EXPECT_EQ(t.parameters.back().name, "bottom.0.weight");
  std::uint64_t embedding = 0;
  for (const auto& p : t.parameters)
    if (p.name.rfind("embeddings.", 0) == 0) embedding += p.count;
  EXPECT_EQ(embedding, 1681000u * 16u);

  const std::uint32_t B = t.block_elems;
  const std::size_t nblocks = static_cast<std::size_t>((t.elements + B - 1) / B);
  double elem = 0, block = 0, union_block = 0;
  std::vector<float> g;
  for (std::uint32_t s = 0; s < t.steps; ++s) {
    std::vector<bool> step_union(nblocks);
    for (std::uint32_t w = 0; w < t.workers; ++w) {
      sparcoll::perf::trace_gradient(t, w, s, &g);
      const auto& rec = t.records[s * t.workers + w];
      for (const std::uint32_t b : rec.blocks) step_union[b] = true;
      elem += static_cast<double>(std::count_if(g.begin(), g.end(), [](float v) { return v != 0.0f; })) /
              static_cast<double>(t.elements);
      block += static_cast<double>(rec.blocks.size()) / static_cast<double>(nblocks);
    }
    union_block += static_cast<double>(std::count(step_union.begin(), step_union.end(), true)) / nblocks;
  }
  const double records = static_cast<double>(t.workers) * t.steps;
  EXPECT_NEAR(elem / records, 0.0078, kRounding);
  EXPECT_NEAR(block / records, 0.0348, kRounding);
  EXPECT_NEAR(union_block / t.steps, 0.1300, kRounding);
}

// Loads `path`, expects failure with `fragment` in the message, and an emptied trace.
void expect_rejected(const std::string& path, const std::string& fragment) {
  GradientTrace t;
  t.workers = 7;
  std::string error;
  EXPECT_FALSE(sparcoll::perf::load_trace(path, &t, &error)) << path;
  EXPECT_NE(error.find(fragment), std::string::npos) << "error was: " << error;
  EXPECT_NE(error.find(path), std::string::npos) << "error does not name the file: " << error;
  EXPECT_EQ(t.workers, 0u);
  EXPECT_TRUE(t.records.empty());
}

TEST_F(StoredTrace, DamagedFilesGiveClearErrors) {
  const std::vector<char> good = read_bytes(trace_path());
  ASSERT_GT(good.size(), 1000u);
  TempDir dir;

  expect_rejected(dir.path() + "/missing.sgtrace", "cannot open");
  expect_rejected(dir.write("empty", {}), "empty file");
  expect_rejected(dir.write("short", std::vector<char>(good.begin(), good.begin() + 4)), "truncated");
  expect_rejected(dir.write("half", std::vector<char>(good.begin(), good.begin() + good.size() / 2)), "truncated");
  expect_rejected(dir.write("last-byte", std::vector<char>(good.begin(), good.end() - 1)), "truncated");
  std::vector<char> f = good;
  f[0] = 'X';
  expect_rejected(dir.write("magic", f), "bad magic");
  f = good;
  f.push_back('\n');
  expect_rejected(dir.write("appended", f), "no end marker");
  f = good;
  f[good.size() / 2] ^= 0x10;
  expect_rejected(dir.write("flipped", f), "CRC-32 mismatch");

  // Damage that keeps the checksum valid reaches the structural checks.
  const std::size_t rec = first_record(*trace_);
  f = good;
  const auto count_at = [&](std::size_t at) {
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(static_cast<unsigned char>(f[at + i])) << (8 * i);
    return v;
  };
  const std::uint32_t claimed = count_at(rec + 8) + 1;  // the first record's non-zero block count, one too many
  for (int i = 0; i < 4; ++i) f[rec + 8 + i] = static_cast<char>(claimed >> (8 * i));
  reseal(&f);
  expect_rejected(dir.write("count", f), "header says");
  f = good;
  f[rec] = 5;  // the first record claims to be step 5
  reseal(&f);
  expect_rejected(dir.write("order", f), "out of order");
  f = good;
  f[rec + 16 + 40] ^= 0x55;  // inside the first record's zlib stream
  reseal(&f);
  expect_rejected(dir.write("deflate", f), "record (step 0, worker 0)");
  f = good;
  f[8] = 9;  // version
  reseal(&f);
  expect_rejected(dir.write("version", f), "unsupported version 9");

  // The intact copy still loads, from another directory.
  GradientTrace t;
  std::string error;
  EXPECT_TRUE(sparcoll::perf::load_trace(dir.write("copy", good), &t, &error)) << error;
  EXPECT_TRUE(error.empty());
  EXPECT_EQ(t.records.size(), static_cast<std::size_t>(kWorkers) * kSteps);
}

// A trace file from its parts (perf/data/README.md), sealed with its CRC and end marker.
struct TraceFile {
  std::vector<char> bytes;
  void u32(std::uint32_t v) { put(v, 4); }
  void u64(std::uint64_t v) { put(v, 8); }
  void raw(const std::vector<unsigned char>& b) { bytes.insert(bytes.end(), b.begin(), b.end()); }
  void put(std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) bytes.push_back(static_cast<char>(v >> (8 * i)));
  }
  // magic, version 1, shape, bf16, an empty description, no parameter table
  TraceFile(std::uint32_t workers, std::uint32_t steps, std::uint32_t block_elems, std::uint64_t elements) {
    for (char c : std::string("SPCTRACE")) bytes.push_back(c);
    u32(1);
    u32(workers);
    u32(steps);
    u32(block_elems);
    u64(elements);
    u32(2);
    u32(0);
    u32(0);
  }
  std::vector<unsigned char> sealed() {
    std::vector<char> f = bytes;
    f.resize(f.size() + 12);
    const std::string end("SPCTEND\0", 8);
    std::copy(end.begin(), end.end(), f.end() - 8);
    reseal(&f);
    return {f.begin(), f.end()};
  }
};

// Loads `file` from memory; expects a refusal naming `fragment`. Skips without zlib.
void expect_refused_bytes(const std::vector<unsigned char>& file, const std::string& fragment) {
  GradientTrace t;
  std::string error;
  const bool loaded = sparcoll::perf::load_trace_bytes(file, "crafted.sgtrace", &t, &error);
  if (error.find("without zlib") != std::string::npos) GTEST_SKIP() << error;
  EXPECT_FALSE(loaded);
  EXPECT_NE(error.find(fragment), std::string::npos) << "error was: " << error;
  EXPECT_TRUE(t.records.empty());
}

// Found by tests/fuzz/fuzz_trace (corpus: crash-shape-without-records): the reader made room for
// workers x steps records before reading any, so a 60-byte file claiming 65536 x 65536 of them
// asked for 200 GB.
TEST(TraceReader, AShapeTheFileCannotHoldIsTruncated) {
  TraceFile f(65536, 65536, 4, 10);
  expect_refused_bytes(f.sealed(), "truncated: 65536 workers x 65536 steps need 4294967296 records");
}

// Found by tests/fuzz/fuzz_trace (corpus: crash-counts-claim-gigabytes): the inflate buffer was
// sized from the record's claimed counts (2 bytes per element of every claimed block), so a
// record of a few bytes claiming 65536 blocks of 2^20 elements asked for 128 GiB before
// inflating anything.
TEST(TraceReader, ClaimedCountsDoNotSizeTheInflateBuffer) {
  TraceFile f(1, 1, 1u << 20, std::uint64_t{1} << 36);  // 65536 blocks, an 8 KiB bitmap
  f.u32(0);      // step
  f.u32(0);      // worker
  f.u32(65536);  // non-zero blocks: all of them
  const std::vector<unsigned char> one_zero_byte = {0x78, 0xda, 0x63, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01};
  f.u32(static_cast<std::uint32_t>(one_zero_byte.size()));
  f.raw(one_zero_byte);
  expect_refused_bytes(f.sealed(), "payload shorter than its block bitmap");
}

#if __has_include(<zlib.h>)
// The inflate buffer starts at 4 KiB (or 4 times the compressed bytes) and grows with the data:
// a record that compresses 1000:1 must still come out whole.
TEST(TraceReader, ARecordFarLargerThanItsCompressedBytesInflatesWhole) {
  constexpr std::uint32_t kBlocks = 256, kBlock = 256;
  TraceFile f(1, 1, kBlock, std::uint64_t{kBlocks} * kBlock);
  std::vector<unsigned char> raw(kBlocks / 8, 0xff);   // every block non-zero
  raw.resize(raw.size() + kBlocks * kBlock, 0x3f);     // high bytes of 1.0 (0x3f80)
  raw.resize(raw.size() + kBlocks * kBlock, 0x80);     // low bytes
  uLongf packed_len = compressBound(static_cast<uLong>(raw.size()));
  std::vector<unsigned char> packed(packed_len);
  ASSERT_EQ(compress2(packed.data(), &packed_len, raw.data(), static_cast<uLong>(raw.size()), 9), Z_OK);
  packed.resize(packed_len);
  ASSERT_LT(4 * packed.size(), raw.size() / 8);
  f.u32(0);
  f.u32(0);
  f.u32(kBlocks);
  f.u32(static_cast<std::uint32_t>(packed.size()));
  f.raw(packed);
  GradientTrace t;
  std::string error;
  const bool loaded = sparcoll::perf::load_trace_bytes(f.sealed(), "compressible.sgtrace", &t, &error);
  if (error.find("without zlib") != std::string::npos) GTEST_SKIP() << error;
  ASSERT_TRUE(loaded) << error;
  ASSERT_EQ(t.records.size(), 1u);
  EXPECT_EQ(t.records[0].blocks.size(), kBlocks);
  ASSERT_EQ(t.records[0].values.size(), std::size_t{kBlocks} * kBlock);
  for (const std::uint16_t v : t.records[0].values) ASSERT_EQ(v, 0x3f80);
}
#endif

}  // namespace
