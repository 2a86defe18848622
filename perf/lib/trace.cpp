#include "trace.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#if SPARCOLL_HAVE_ZLIB
#include <zlib.h>
#endif

namespace sparcoll::perf {
namespace {

constexpr char kMagic[8] = {'S', 'P', 'C', 'T', 'R', 'A', 'C', 'E'};
constexpr char kEndMagic[8] = {'S', 'P', 'C', 'T', 'E', 'N', 'D', '\0'};
constexpr std::uint32_t kVersion = 1;
constexpr std::uint32_t kValueBf16 = 2;
constexpr std::size_t kTrailer = 4 + sizeof kEndMagic;  // crc32 + end marker
constexpr std::uint64_t kMaxElements = std::uint64_t{1} << 36;

// Bounds-checked little-endian reader over the file's bytes.
class Reader {
 public:
  Reader(const std::vector<unsigned char>& bytes, std::size_t end) : bytes_(bytes), end_(end) {}
  std::size_t pos() const { return pos_; }
  std::size_t left() const { return end_ - pos_; }
  bool u32(std::uint32_t* v) { return le(v); }
  bool u64(std::uint64_t* v) { return le(v); }
  bool bytes(std::size_t n, const unsigned char** p) {
    if (left() < n) return false;
    *p = bytes_.data() + pos_;
    pos_ += n;
    return true;
  }
  bool string(std::size_t max, std::string* s) {
    std::uint32_t n = 0;
    const unsigned char* p = nullptr;
    if (!u32(&n) || n > max || !bytes(n, &p)) return false;
    s->assign(reinterpret_cast<const char*>(p), n);
    return true;
  }

 private:
  template <typename T>
  bool le(T* v) {
    if (left() < sizeof(T)) return false;
    T x = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) x |= static_cast<T>(bytes_[pos_ + i]) << (8 * i);
    pos_ += sizeof(T);
    *v = x;
    return true;
  }
  const std::vector<unsigned char>& bytes_;
  std::size_t end_;
  std::size_t pos_ = 0;
};

bool read_file(const std::string& path, std::vector<unsigned char>* out, std::string* error) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    *error = "gradient trace " + path + ": cannot open: " + std::strerror(errno);
    return false;
  }
  unsigned char buf[1 << 16];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out->insert(out->end(), buf, buf + n);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) *error = "gradient trace " + path + ": read error";
  return !failed;
}

#if SPARCOLL_HAVE_ZLIB
// Inflates exactly one zlib stream that must fill at most `max` bytes and use all of `in`. The
// output grows as zlib fills it: `max` comes from the file's own counts, and a few bytes of
// header must not make the reader allocate gigabytes before the data shows how much there is.
bool inflate_exact(const unsigned char* in, std::size_t in_len, std::size_t max, std::vector<unsigned char>* out,
                   std::string* why) {
  const std::size_t limit = max + 1;  // one spare byte: a stream longer than `max` is detected, not cut
  out->assign(std::min<std::size_t>(limit, std::max<std::size_t>(4096, 4 * in_len)), 0);
  z_stream z{};
  if (inflateInit(&z) != Z_OK) {
    *why = "zlib inflateInit failed";
    return false;
  }
  z.next_in = const_cast<unsigned char*>(in);
  z.avail_in = static_cast<uInt>(in_len);
  std::size_t produced = 0;
  int rc = Z_OK;
  for (;;) {
    if (produced == out->size()) {
      if (out->size() == limit) break;  // full: the stream is longer than `max`
      out->resize(std::min(limit, 2 * out->size()));
    }
    const std::size_t room = std::min<std::size_t>(out->size() - produced, 1u << 30);  // avail_out is a uInt
    z.next_out = out->data() + produced;
    z.avail_out = static_cast<uInt>(room);
    rc = inflate(&z, Z_NO_FLUSH);
    produced += room - z.avail_out;
    if (rc != Z_OK) break;
  }
  const uInt unused = z.avail_in;
  const char* msg = z.msg;
  inflateEnd(&z);
  if (produced > max) {
    *why = "payload is larger than its header allows";
    return false;
  }
  if (rc != Z_STREAM_END) {
    *why = std::string("compressed data is damaged (zlib: ") +
           (msg ? msg : rc == Z_BUF_ERROR ? "stream ends early or is too long" : "error " + std::to_string(rc)) + ")";
    return false;
  }
  if (unused != 0) {
    *why = "compressed data is followed by " + std::to_string(unused) + " stray bytes";
    return false;
  }
  out->resize(produced);
  return true;
}
#endif

}  // namespace

bool load_trace(const std::string& path, GradientTrace* out, std::string* error) {
  std::string scratch;
  if (error == nullptr) error = &scratch;
  *out = GradientTrace{};
  std::vector<unsigned char> file;
  if (!read_file(path, &file, error)) return false;
  return load_trace_bytes(file, path, out, error);
}

bool load_trace_bytes(const std::vector<unsigned char>& file, const std::string& path, GradientTrace* out,
                      std::string* error) {
  std::string scratch;
  if (error == nullptr) error = &scratch;
  *out = GradientTrace{};
  auto fail = [&](const std::string& what) {
    *error = "gradient trace " + path + ": " + what;
    *out = GradientTrace{};
    return false;
  };
#if !SPARCOLL_HAVE_ZLIB
  (void)file;
  return fail("sparcoll was built without zlib (apt-get install zlib1g-dev, then reconfigure), traces cannot be read");
#else
  if (file.empty()) return fail("empty file");
  if (std::memcmp(file.data(), kMagic, std::min(file.size(), sizeof kMagic)) != 0)
    return fail("not a gradient trace (bad magic)");
  if (file.size() < sizeof kMagic) return fail("truncated: " + std::to_string(file.size()) + " bytes");
  if (file.size() < sizeof kMagic + kTrailer ||
      std::memcmp(file.data() + file.size() - sizeof kEndMagic, kEndMagic, sizeof kEndMagic) != 0)
    return fail("truncated: no end marker (" + std::to_string(file.size()) + " bytes)");
  const std::size_t body = file.size() - kTrailer;
  std::uint32_t stored_crc = 0;
  for (int i = 0; i < 4; ++i) stored_crc |= static_cast<std::uint32_t>(file[body + i]) << (8 * i);
  uLong crc = crc32(0L, Z_NULL, 0);
  for (std::size_t at = 0; at < body;) {  // crc32 takes uInt lengths
    const std::size_t n = std::min<std::size_t>(body - at, 1u << 30);
    crc = crc32(crc, file.data() + at, static_cast<uInt>(n));
    at += n;
  }
  if (static_cast<std::uint32_t>(crc) != stored_crc) return fail("corrupt: CRC-32 mismatch");

  Reader r(file, body);
  const unsigned char* skip = nullptr;
  std::uint32_t version = 0, value_format = 0, nparams = 0;
  GradientTrace t;
  if (!r.bytes(sizeof kMagic, &skip) || !r.u32(&version) || !r.u32(&t.workers) || !r.u32(&t.steps) ||
      !r.u32(&t.block_elems) || !r.u64(&t.elements) || !r.u32(&value_format))
    return fail("truncated header");
  if (version != kVersion) return fail("unsupported version " + std::to_string(version) + " (this build reads 1)");
  if (value_format != kValueBf16) return fail("unsupported value format " + std::to_string(value_format));
  if (t.workers == 0 || t.steps == 0 || t.workers > 65536 || t.steps > 65536)
    return fail("implausible shape: " + std::to_string(t.workers) + " workers, " + std::to_string(t.steps) + " steps");
  if (t.block_elems == 0 || t.block_elems > (1u << 20)) return fail("bad block size " + std::to_string(t.block_elems));
  if (t.elements == 0 || t.elements > kMaxElements) return fail("bad element count " + std::to_string(t.elements));
  if (!r.string(1 << 20, &t.description)) return fail("truncated or oversized description");
  if (!r.u32(&nparams) || nparams > (1u << 20)) return fail("bad parameter table");
  std::uint64_t next = 0;
  for (std::uint32_t i = 0; i < nparams; ++i) {
    TraceParameter p;
    if (!r.string(4096, &p.name) || !r.u64(&p.offset) || !r.u64(&p.count)) return fail("truncated parameter table");
    if (p.offset != next || p.count > t.elements - next)
      return fail("parameter " + p.name + " does not continue the flattened layout");
    next += p.count;
    t.parameters.push_back(std::move(p));
  }
  if (nparams != 0 && next != t.elements) return fail("parameters cover " + std::to_string(next) + " of " +
                                                      std::to_string(t.elements) + " elements");

  const std::uint64_t nblocks = (t.elements + t.block_elems - 1) / t.block_elems;
  const std::uint64_t last_len = t.elements - (nblocks - 1) * t.block_elems;
  const std::size_t bitmap_bytes = static_cast<std::size_t>((nblocks + 7) / 8);
  // Every record takes at least its 16-byte header: the shape cannot promise more records than
  // the file has room for (65536 x 65536 of them would be gigabytes of empty records).
  const std::uint64_t nrecords = std::uint64_t{t.workers} * t.steps;
  if (r.left() / 16 < nrecords)
    return fail("truncated: " + std::to_string(t.workers) + " workers x " + std::to_string(t.steps) +
                " steps need " + std::to_string(nrecords) + " records, the file has room for " +
                std::to_string(r.left() / 16));
  t.records.resize(static_cast<std::size_t>(nrecords));
  std::vector<unsigned char> raw;
  for (std::uint32_t s = 0; s < t.steps; ++s) {
    for (std::uint32_t w = 0; w < t.workers; ++w) {
      const std::string where = "record (step " + std::to_string(s) + ", worker " + std::to_string(w) + "): ";
      std::uint32_t step = 0, worker = 0, nonzero = 0, comp = 0;
      const unsigned char* data = nullptr;
      if (!r.u32(&step) || !r.u32(&worker) || !r.u32(&nonzero) || !r.u32(&comp) || !r.bytes(comp, &data))
        return fail(where + "truncated at byte " + std::to_string(r.pos()));
      if (step != s || worker != w)
        return fail(where + "out of order (file says step " + std::to_string(step) + ", worker " +
                    std::to_string(worker) + ")");
      if (nonzero > nblocks) return fail(where + "more non-zero blocks than the tensor has");
      const std::size_t max_raw = bitmap_bytes + 2 * static_cast<std::size_t>(nonzero) * t.block_elems;
      std::string why;
      if (!inflate_exact(data, comp, max_raw, &raw, &why)) return fail(where + why);
      if (raw.size() < bitmap_bytes) return fail(where + "payload shorter than its block bitmap");
      GradientTrace::Record& rec = t.records[static_cast<std::size_t>(s) * t.workers + w];
      rec.blocks.reserve(nonzero);
      for (std::size_t i = 0; i < bitmap_bytes; ++i) {
        for (unsigned bit = 0; bit < 8; ++bit) {
          if (!(raw[i] >> bit & 1)) continue;
          const std::uint64_t b = i * 8 + bit;
          if (b >= nblocks) return fail(where + "bitmap marks a block past the end of the tensor");
          rec.blocks.push_back(static_cast<std::uint32_t>(b));
        }
      }
      if (rec.blocks.size() != nonzero)
        return fail(where + "bitmap has " + std::to_string(rec.blocks.size()) + " blocks, header says " +
                    std::to_string(nonzero));
      std::size_t values = rec.blocks.size() * static_cast<std::size_t>(t.block_elems);
      if (!rec.blocks.empty() && rec.blocks.back() == nblocks - 1) values -= t.block_elems - last_len;
      if (raw.size() != bitmap_bytes + 2 * values)
        return fail(where + "payload has " + std::to_string(raw.size()) + " bytes, expected " +
                    std::to_string(bitmap_bytes + 2 * values));
      const unsigned char* hi = raw.data() + bitmap_bytes;
      const unsigned char* lo = hi + values;
      rec.values.resize(values);
      for (std::size_t i = 0; i < values; ++i)
        rec.values[i] = static_cast<std::uint16_t>(static_cast<unsigned>(hi[i]) << 8 | lo[i]);
    }
  }
  if (r.left() != 0) return fail(std::to_string(r.left()) + " stray bytes after the last record");
  *out = std::move(t);
  error->clear();
  return true;
#endif
}

void trace_gradient(const GradientTrace& trace, std::uint32_t worker, std::uint32_t step, std::vector<float>* out) {
  if (worker >= trace.workers || step >= trace.steps)
    throw std::out_of_range("trace_gradient: worker " + std::to_string(worker) + ", step " + std::to_string(step) +
                            " outside a trace of " + std::to_string(trace.workers) + " workers x " +
                            std::to_string(trace.steps) + " steps");
  out->assign(static_cast<std::size_t>(trace.elements), 0.0f);
  const GradientTrace::Record& rec = trace.records[static_cast<std::size_t>(step) * trace.workers + worker];
  const std::uint16_t* v = rec.values.data();
  float* dst = out->data();
  for (const std::uint32_t b : rec.blocks) {
    const std::uint64_t base = static_cast<std::uint64_t>(b) * trace.block_elems;
    const std::size_t len = static_cast<std::size_t>(std::min<std::uint64_t>(trace.block_elems, trace.elements - base));
    for (std::size_t i = 0; i < len; ++i)
      dst[base + i] = std::bit_cast<float>(static_cast<std::uint32_t>(v[i]) << 16);
    v += len;
  }
}

}  // namespace sparcoll::perf
