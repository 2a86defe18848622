// The local parts of the compressed allreduce (src/algo/oktopk.cpp, topk_ef.cpp) on one rank:
// selection, residual rule, result, with no peer to talk to (p2p::Peers without a channel).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "algo/compressed.hpp"
#include "p2p/drive.hpp"

namespace sparcoll::algo {
namespace {

// Runs a collective (a Task) to its end on this thread.
Status run(p2p::Peers& peers, Task task) { return p2p::drive(peers, task); }

std::vector<float> random_grad(std::size_t n, int seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> g(n);
  for (auto& v : g) v = normal(rng);
  return g;
}

struct OneRank {
  p2p::Peers peers{nullptr, 0, 1, false};
  CompressScratch scratch;
  Scratch dense;
  CompressedTensor tensor;
  OneRank(std::size_t n) {
    tensor.id = 9;
    tensor.n = n;
  }
  CompressedCall call(const std::vector<float>& g, std::vector<float>& out, const Compression& c, std::size_t k) {
    peers.begin(0, "test", "local", p2p::Clock::now() + std::chrono::seconds(5), 0x8000);
    CompressedCall call;
    call.tensor = &tensor;
    call.grad = g.data();
    call.out = out.data();
    call.n = g.size();
    call.k = k;
    call.c = c;
    return call;
  }
  std::vector<float> residual() {
    std::size_t n = 0;
    const float* r = tensor.residual.residual(tensor.id, &n);
    return std::vector<float>(r, r + n);
  }
};

// On one rank the region is the whole tensor: the survivors are the top-k of the locally
// selected entries, the residual is acc with the survivors cleared, and nothing is sent.
TEST(CompressedLocal, OkTopkOneRankSelectsAtMostKAndKeepsTheRest) {
  const std::size_t n = 3000, k = 30;
  OneRank r(n);
  Compression c;
  c.k = k;
  c.tau = 4;
  c.tau_prime = 3;
  c.op = ReduceOp::sum;
  std::vector<float> acc(n, 0.0f);
  for (int step = 0; step < 12; ++step) {
    const std::vector<float> g = random_grad(n, step);
    for (std::size_t i = 0; i < n; ++i) acc[i] += g[i];
    std::vector<float> out(n);
    CompressedCall call = r.call(g, out, c, k);
    ASSERT_TRUE(run(r.peers, oktopk_allreduce(r.peers, call, r.scratch)).ok());
    EXPECT_EQ(call.payload_words, 0u);
    const std::vector<float> res = r.residual();
    std::size_t survivors = 0;
    float min_out = INFINITY, max_rest = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (out[i] != 0.0f) {
        ++survivors;
        EXPECT_EQ(out[i], acc[i]);
        EXPECT_EQ(res[i], 0.0f);
        min_out = std::min(min_out, std::fabs(out[i]));
      } else {
        EXPECT_EQ(res[i], acc[i]) << i;
        max_rest = std::max(max_rest, std::fabs(acc[i]));
      }
    }
    EXPECT_LE(survivors, k);
    EXPECT_GE(survivors, k / 2) << "step " << step;
    // One rank: what survives is above everything that did not (both thresholds cut one vector).
    EXPECT_GE(min_out, max_rest) << "step " << step;
    acc = res;
  }
}

TEST(CompressedLocal, TopkAllgatherOneRankSendsExactlyTheTopKAndAveragesByOne) {
  const std::size_t n = 1000, k = 7;
  OneRank r(n);
  Compression c;
  c.algo = CompressionAlgo::topk_allgather;
  c.k = k;
  const std::vector<float> g = random_grad(n, 3);
  std::vector<float> out(n);
  CompressedCall call = r.call(g, out, c, k);
  ASSERT_TRUE(run(r.peers, topk_ef_allreduce(r.peers, call, r.scratch, r.dense)).ok());
  std::vector<float> mags(n);
  for (std::size_t i = 0; i < n; ++i) mags[i] = std::fabs(g[i]);
  std::nth_element(mags.begin(), mags.begin() + (k - 1), mags.end(), std::greater<float>());
  const std::vector<float> res = r.residual();
  std::size_t sent = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (std::fabs(g[i]) >= mags[k - 1]) {
      ++sent;
      EXPECT_EQ(out[i], g[i]);
      EXPECT_EQ(res[i], 0.0f);
    } else {
      EXPECT_EQ(out[i], 0.0f);
      EXPECT_EQ(res[i], g[i]);
    }
  }
  EXPECT_EQ(sent, k);
}

// Lossy values: the residual keeps the rounding error, so acc = decode(sent) + residual.
TEST(CompressedLocal, QuantizedValuesLeaveTheRoundingErrorInTheResidual) {
  const std::size_t n = 2048;
  for (ValueFormat f : {ValueFormat::bf16, ValueFormat::qsgd4}) {
    OneRank r(n);
    Compression c;
    c.algo = CompressionAlgo::none;
    c.values = f;
    c.op = ReduceOp::sum;
    c.seed = 1;
    const std::vector<float> g = random_grad(n, 5);
    std::vector<float> out(n);
    CompressedCall call = r.call(g, out, c, n);
    ASSERT_TRUE(run(r.peers, topk_ef_allreduce(r.peers, call, r.scratch, r.dense)).ok());
    const std::vector<float> res = r.residual();
    for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(res[i], g[i] - out[i]) << i;
  }
}

}  // namespace
}  // namespace sparcoll::algo
