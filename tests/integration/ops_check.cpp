// sparcoll-ops-check: under sparcoll-run, allreduce and reduce with the ops beyond sum, avg, min
// and max, and with the 64-bit dtypes (f64, i64: on the dense algorithms, which alone take them;
// block-sparse refuses them): product on every dtype, band, bor and bxor on i32, with every algorithm that can run
// (direct only over shm), on tensors with zero blocks among non-zero ones (zero is not the
// neutral element of product and band: a rank's zero block zeroes the result's block; it is
// for bor and bxor) and sizes with odd tails. The values are 0, +-1, +-2 and +-0.5, so every
// product of up to 12 ranks is exact in every dtype and any order of multiplication gives the
// same value: the result is compared element by element with the product computed here, and
// the allreduce results' hashes are compared across ranks (bitwise identical everywhere).
// The bitwise ops' values are arbitrary bit patterns (any order gives the same bits).
// Prints "ops-check: N cases ok" on rank 0; exits 1 naming the first wrong element.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "sparcoll/sparcoll.hpp"

namespace {

using sparcoll::Algorithm;
using sparcoll::DataType;
using sparcoll::ReduceOp;

// Rank r's value at element i: block b = i / 256 is zero on every rank when b % 5 == 4, zero on
// rank b % ranks when b % 5 == 2, and otherwise one of the exact factors.
double value(int r, int ranks, std::size_t i) {
  const std::size_t b = i / 256;
  if (b % 5 == 4 || (b % 5 == 2 && static_cast<int>(b % static_cast<std::size_t>(ranks)) == r)) return 0.0;
  static constexpr double kFactors[] = {1.0, -1.0, 2.0, 0.5, -2.0, -0.5, 1.0, 2.0, -1.0};
  return kFactors[(i * 7 + static_cast<std::size_t>(r) * 3) % 9];
}

double int_value(int r, int ranks, std::size_t i) {  // i32: 0, +-1, +-2, +-3
  const double v = value(r, ranks, i);
  return v == 0.5 ? 3.0 : v == -0.5 ? -3.0 : v;
}

// i32 bit patterns for the bitwise ops: zero where value() is, else mostly-set random bits (so
// that band does not fade to 0 at once).
std::int32_t bits_value(int r, int ranks, std::size_t i) {
  if (value(r, ranks, i) == 0.0) return 0;
  std::uint32_t x = static_cast<std::uint32_t>(i) * 2654435761u ^ static_cast<std::uint32_t>(r) * 40503u;
  x ^= x >> 13;
  x *= 0x5bd1e995u;
  return static_cast<std::int32_t>(x | 0xf0f0f000u);
}

std::uint16_t f32_to_half_bits(DataType dt, float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  if (dt == DataType::bf16) return static_cast<std::uint16_t>(u >> 16);  // exact values: truncation is exact
  // f16 of an exact power of two (or 0) within range: sign, exponent rebiased, no mantissa.
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  if ((u & 0x7fffffffu) == 0) return sign;
  const int exp = static_cast<int>((u >> 23) & 0xff) - 127 + 15;
  return static_cast<std::uint16_t>(sign | (exp << 10) | ((u >> 13) & 0x3ff));
}

double half_bits_to_double(DataType dt, std::uint16_t h) {
  if (dt == DataType::bf16) {
    const std::uint32_t u = std::uint32_t{h} << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  const int exp = (h >> 10) & 0x1f;
  const double mant = (h & 0x3ff) / 1024.0;
  const double mag = exp == 0 ? std::ldexp(mant, -14) : std::ldexp(1.0 + mant, exp - 15);
  return (h & 0x8000) ? -mag : mag;
}

// The tensor of rank r in dtype's bytes.
std::vector<std::byte> make(DataType dt, ReduceOp op, int r, int ranks, std::size_t count) {
  std::vector<std::byte> out(count * sparcoll::dtype_size(dt));
  for (std::size_t i = 0; i < count; ++i) {
    if (sparcoll::reduce_op_is_bitwise(op)) {
      const std::int32_t v = bits_value(r, ranks, i);
      std::memcpy(out.data() + i * 4, &v, 4);
    } else if (dt == DataType::i32) {
      const auto v = static_cast<std::int32_t>(int_value(r, ranks, i));
      std::memcpy(out.data() + i * 4, &v, 4);
    } else if (dt == DataType::f32) {
      const auto v = static_cast<float>(value(r, ranks, i));
      std::memcpy(out.data() + i * 4, &v, 4);
    } else {
      const std::uint16_t h = f32_to_half_bits(dt, static_cast<float>(value(r, ranks, i)));
      std::memcpy(out.data() + i * 2, &h, 2);
    }
  }
  return out;
}

double element(DataType dt, const std::vector<std::byte>& t, std::size_t i) {
  if (dt == DataType::i32) {
    std::int32_t v;
    std::memcpy(&v, t.data() + i * 4, 4);
    return v;
  }
  if (dt == DataType::f32) {
    float v;
    std::memcpy(&v, t.data() + i * 4, 4);
    return v;
  }
  std::uint16_t h;
  std::memcpy(&h, t.data() + i * 2, 2);
  return half_bits_to_double(dt, h);
}

// Empty when `got` holds op over every rank's tensor, else the first wrong element.
std::string verify(DataType dt, ReduceOp op, const std::vector<std::byte>& got, int ranks, std::size_t count) {
  for (std::size_t i = 0; i < count && sparcoll::reduce_op_is_bitwise(op); ++i) {
    std::int32_t want = bits_value(0, ranks, i), have;
    for (int r = 1; r < ranks; ++r) {
      const std::int32_t x = bits_value(r, ranks, i);
      want = op == ReduceOp::band ? want & x : op == ReduceOp::bor ? want | x : want ^ x;
    }
    std::memcpy(&have, got.data() + i * 4, 4);
    if (have != want)
      return "element " + std::to_string(i) + " is " + std::to_string(have) + ", expected " + std::to_string(want);
  }
  if (sparcoll::reduce_op_is_bitwise(op)) return std::string();
  for (std::size_t i = 0; i < count; ++i) {
    double want = 1.0;
    for (int r = 0; r < ranks; ++r) want *= dt == DataType::i32 ? int_value(r, ranks, i) : value(r, ranks, i);
    const double have = element(dt, got, i);
    if (have != want)  // -0 == +0: the sign of a zero product is not specified
      return "element " + std::to_string(i) + " is " + std::to_string(have) + ", expected " + std::to_string(want);
  }
  return std::string();
}

// The 64-bit types: f64 takes value() (exact in any order), i64 bit patterns beyond 32 bits
// (sums and products wrap modulo 2^64, as the reference's unsigned arithmetic does).
std::int64_t wide_int(int r, int ranks, std::size_t i) {
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(static_cast<std::uint32_t>(bits_value(r, ranks, i))) *
                                   4294967311ull);
}

std::vector<std::byte> make_wide(DataType dt, int r, int ranks, std::size_t count) {
  std::vector<std::byte> out(count * 8);
  for (std::size_t i = 0; i < count; ++i) {
    if (dt == DataType::f64) {
      const double v = value(r, ranks, i);
      std::memcpy(out.data() + i * 8, &v, 8);
    } else {
      const std::int64_t v = wide_int(r, ranks, i);
      std::memcpy(out.data() + i * 8, &v, 8);
    }
  }
  return out;
}

std::string verify_wide(DataType dt, ReduceOp op, const std::vector<std::byte>& got, int ranks, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    if (dt == DataType::f64) {
      double want = value(0, ranks, i), have;
      for (int r = 1; r < ranks; ++r) {
        const double x = value(r, ranks, i);
        want = op == ReduceOp::sum       ? want + x
               : op == ReduceOp::product ? want * x
               : op == ReduceOp::min     ? (x < want ? x : want)
                                         : (x > want ? x : want);
      }
      std::memcpy(&have, got.data() + i * 8, 8);
      if (have != want)
        return "element " + std::to_string(i) + " is " + std::to_string(have) + ", expected " + std::to_string(want);
      continue;
    }
    std::uint64_t want = static_cast<std::uint64_t>(wide_int(0, ranks, i));
    for (int r = 1; r < ranks; ++r) {
      const auto x = static_cast<std::uint64_t>(wide_int(r, ranks, i));
      const auto sx = static_cast<std::int64_t>(x), sw = static_cast<std::int64_t>(want);
      want = op == ReduceOp::sum       ? want + x
             : op == ReduceOp::product ? want * x
             : op == ReduceOp::min     ? static_cast<std::uint64_t>(sx < sw ? sx : sw)
             : op == ReduceOp::band    ? want & x
                                       : want ^ x;
    }
    std::uint64_t have;
    std::memcpy(&have, got.data() + i * 8, 8);
    if (have != want) return "element " + std::to_string(i) + " differs";
  }
  return std::string();
}

std::uint64_t fnv1a(const std::vector<std::byte>& t) {
  std::uint64_t h = 1469598103934665603ull;
  for (std::byte b : t) h = (h ^ static_cast<std::uint8_t>(b)) * 1099511628211ull;
  return h;
}

}  // namespace

int main() {
  auto comm = sparcoll::Communicator::from_env();
  const int ranks = comm.size(), rank = comm.rank();
  std::vector<Algorithm> algorithms = {Algorithm::auto_select, Algorithm::block_sparse, Algorithm::ring,
                                       Algorithm::butterfly, Algorithm::recursive_doubling,
                                       Algorithm::block_recursive_doubling, Algorithm::hybrid,
                                       Algorithm::ssar_recursive_doubling, Algorithm::ssar_split_allgather,
                                       Algorithm::dsar_split_allgather};
  if (comm.transport_name() == "shm") algorithms.push_back(Algorithm::direct);
  int cases = 0;
  struct OpDtype {
    ReduceOp op;
    DataType dt;
  };
  const OpDtype combos[] = {{ReduceOp::product, DataType::f32}, {ReduceOp::product, DataType::f16},
                            {ReduceOp::product, DataType::bf16}, {ReduceOp::product, DataType::i32},
                            {ReduceOp::band, DataType::i32},     {ReduceOp::bor, DataType::i32},
                            {ReduceOp::bxor, DataType::i32}};
  for (const auto [op, dt] : combos) {
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{1283}, std::size_t{70001}}) {
      const std::vector<std::byte> mine = make(dt, op, rank, ranks, count);
      const std::string what = std::string(sparcoll::reduce_op_name(op)) + " " + std::string(sparcoll::dtype_name(dt)) +
                               " count " + std::to_string(count);
      for (Algorithm algo : algorithms) {
        std::vector<std::byte> out(mine.size());
        comm.allreduce(mine.data(), out.data(), count, dt, op, algo);
        const std::string wrong = verify(dt, op, out, ranks, count);
        const std::string name(sparcoll::algorithm_name(algo));
        if (!wrong.empty()) {
          std::printf("ops-check: rank %d: allreduce %s %s: %s\n", rank, name.c_str(), what.c_str(), wrong.c_str());
          return 1;
        }
        std::uint64_t hashes[2] = {fnv1a(out), ~fnv1a(out)};  // max of h and of ~h: all equal iff min == max
        comm.allreduce(hashes, hashes, 4, DataType::i32, ReduceOp::max);
        if (hashes[0] != fnv1a(out) || hashes[1] != ~fnv1a(out)) {
          std::printf("ops-check: rank %d: allreduce %s %s: the result's bytes differ across ranks\n", rank,
                      name.c_str(), what.c_str());
          return 1;
        }
        ++cases;
      }
      for (int root = 0; root < ranks; ++root) {
        std::vector<std::byte> out(mine.size());
        comm.reduce(mine.data(), rank == root ? out.data() : nullptr, count, dt, op, root);
        if (rank == root) {
          const std::string wrong = verify(dt, op, out, ranks, count);
          if (!wrong.empty()) {
            std::printf("ops-check: rank %d: reduce to %d %s: %s\n", rank, root, what.c_str(), wrong.c_str());
            return 1;
          }
        }
        ++cases;
      }
    }
  }
  // f64 and i64: the dense algorithms (auto picks among them) and reduce; the others refuse.
  struct WideCase {
    ReduceOp op;
    DataType dt;
  };
  const WideCase wide[] = {{ReduceOp::sum, DataType::f64}, {ReduceOp::product, DataType::f64},
                           {ReduceOp::min, DataType::f64}, {ReduceOp::max, DataType::f64},
                           {ReduceOp::sum, DataType::i64}, {ReduceOp::product, DataType::i64},
                           {ReduceOp::min, DataType::i64}, {ReduceOp::band, DataType::i64},
                           {ReduceOp::bxor, DataType::i64}};
  for (const auto [op, dt] : wide) {
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{1283}, std::size_t{70001}}) {
      const std::vector<std::byte> mine = make_wide(dt, rank, ranks, count);
      const std::string what = std::string(sparcoll::reduce_op_name(op)) + " " + std::string(sparcoll::dtype_name(dt)) +
                               " count " + std::to_string(count);
      for (Algorithm algo :
           {Algorithm::auto_select, Algorithm::ring, Algorithm::butterfly, Algorithm::recursive_doubling}) {
        std::vector<std::byte> out(mine.size());
        comm.allreduce(mine.data(), out.data(), count, dt, op, algo);
        if (const std::string wrong = verify_wide(dt, op, out, ranks, count); !wrong.empty()) {
          std::printf("ops-check: rank %d: allreduce %s %s: %s\n", rank,
                      std::string(sparcoll::algorithm_name(algo)).c_str(), what.c_str(), wrong.c_str());
          return 1;
        }
        ++cases;
      }
      for (int root = 0; root < ranks; ++root) {
        std::vector<std::byte> out(mine.size());
        comm.reduce(mine.data(), rank == root ? out.data() : nullptr, count, dt, op, root);
        if (rank == root)
          if (const std::string wrong = verify_wide(dt, op, out, ranks, count); !wrong.empty()) {
            std::printf("ops-check: rank %d: reduce to %d %s: %s\n", rank, root, what.c_str(), wrong.c_str());
            return 1;
          }
        ++cases;
      }
    }
  }
  {
    double x = 1.0;
    try {
      comm.allreduce(&x, &x, 1, DataType::f64, ReduceOp::sum, Algorithm::block_sparse);
      std::printf("ops-check: rank %d: block_sparse took f64\n", rank);
      return 1;
    } catch (const sparcoll::Error& e) {
      if (e.code() != sparcoll::ErrorCode::invalid_argument || std::strstr(e.what(), "reduces 32-bit dtypes") == nullptr) {
        std::printf("ops-check: rank %d: block_sparse with f64: %s\n", rank, e.what());
        return 1;
      }
    }
    ++cases;
  }
  if (rank == 0) std::printf("ops-check: %d cases ok\n", cases);
  return 0;
}
