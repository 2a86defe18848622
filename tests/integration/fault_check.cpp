// sparcoll-fault SCENARIO: run under sparcoll-run; rank 1 (the "culprit") misbehaves in the way
// SCENARIO names and every rank checks it gets the error it should, with the code it should.
// Each rank prints "fault: rank R: <code>: <message>" and exits 0 when the outcome is the
// expected one, 1 otherwise. The culprit of `die` exits 0 on purpose so the launcher does not
// stop the survivors, whose error is the point of the test; the culprit of `ring_die` is a forked
// child that is SIGKILLed mid-collective while its parent (what the launcher sees) exits 0.
// Scenarios starting with ring_, allgather_, reduce_scatter_, broadcast_ and p2p_ exercise the
// collective thread (peer-to-peer collectives) rather than block-sparse aggregation.
#include <signal.h>
#include <sys/inotify.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "sparcoll/sparcoll.hpp"

namespace {

using sparcoll::DataType;
using sparcoll::ErrorCode;
using sparcoll::ReduceOp;

int rank_from_env() {
  const char* r = std::getenv("SPARCOLL_RANK");
  return r ? std::atoi(r) : 0;
}

int report(int rank, const sparcoll::Error& e, ErrorCode want, const char* must_mention) {
  std::printf("fault: rank %d: %s\n", rank, e.what());
  std::fflush(stdout);
  if (e.code() != want) {
    std::printf("fault: rank %d: expected code '%s'\n", rank, sparcoll::error_code_name(want));
    return 1;
  }
  if (must_mention && std::strstr(e.what(), must_mention) == nullptr) {
    std::printf("fault: rank %d: expected the message to mention '%s'\n", rank, must_mention);
    return 1;
  }
  return 0;
}

// After a clean per-op failure (mismatch, invalid argument) the communicator must still work.
int check_still_works(sparcoll::Communicator& comm) {
  std::vector<float> v(1000, 1.0f);
  comm.allreduce(v.data(), v.data(), v.size(), DataType::f32, ReduceOp::sum);
  for (float x : v)
    if (x != static_cast<float>(comm.size())) {
      std::printf("fault: rank %d: communicator gave a wrong sum after the failure\n", comm.rank());
      return 1;
    }
  std::printf("fault: rank %d: communicator still works\n", comm.rank());
  return 0;
}

// After a per-op failure of a peer-to-peer collective the collective thread must still work
// (the failed collective is forgotten on every rank, not left to break the next one), and so
// must block-sparse aggregation.
int check_p2p_still_works(sparcoll::Communicator& comm) {
  std::vector<float> v(3000, 1.0f);
  comm.allreduce(v.data(), v.data(), v.size(), DataType::f32, ReduceOp::sum, sparcoll::Algorithm::ring);
  for (float x : v)
    if (x != static_cast<float>(comm.size())) {
      std::printf("fault: rank %d: ring allreduce gave a wrong sum after the failure\n", comm.rank());
      return 1;
    }
  std::vector<std::int32_t> b(777, comm.rank() == 0 ? 42 : -1);
  comm.broadcast(b.data(), b.size(), DataType::i32, 0);
  for (std::int32_t x : b)
    if (x != 42) {
      std::printf("fault: rank %d: broadcast gave a wrong value after the failure\n", comm.rank());
      return 1;
    }
  return check_still_works(comm);
}

// The hybrid allreduce's two shapes of hybrid_kept_plan_null_buffer: one sent whole (below 2 MiB),
// one split into stripes. Each call's sum is checked, and that the first two calls of a shape
// exchanged the densities and the later ones planned from what the shape keeps; false on a
// wrong one.
constexpr std::size_t kHybridShapes[] = {std::size_t{1} << 18, std::size_t{3} << 18};

// Every 7th element of the first half, and of about 1 block of 256 in 12 in the second half
// (scattered by a hash, so that the sample of every 16th block sees the same density): the split
// shape has dense stripes (sampled from the result) and sparse ones (counted by the engine),
// both of which the plan that follows the results reads.
bool hybrid_nonzero(std::size_t i, std::size_t count) {
  return i % 7 == 0 && (i < count / 2 || (i / 256) * 2654435761u % 97 < 8);
}

bool hybrid_sums_right(sparcoll::Communicator& comm, int rounds) {
  for (int round = 0; round < rounds; ++round)
    for (const std::size_t count : kHybridShapes) {
      // Every 7th element non-zero on every rank: the same densities every call, so the
      // shape's density table is kept and the exchange skipped from the third call on.
      std::vector<float> v(count, 0.0f);
      for (std::size_t i = 0; i < count; ++i)
        if (hybrid_nonzero(i, count)) v[i] = static_cast<float>(comm.rank() + 1);
      sparcoll::Request r = comm.iallreduce(v.data(), v.data(), count, DataType::f32, ReduceOp::sum,
                                            sparcoll::Algorithm::hybrid);
      r.wait();
      const float want = static_cast<float>(comm.size() * (comm.size() + 1) / 2);
      for (std::size_t i = 0; i < count; ++i)
        if (v[i] != (hybrid_nonzero(i, count) ? want : 0.0f)) {
          std::printf("fault: rank %d: hybrid allreduce of %zu gave a wrong sum at %zu\n", comm.rank(), count, i);
          return false;
        }
      const sparcoll::OpStats st = r.stats();
      if (count == kHybridShapes[1] && (st.dense_elements == 0 || st.dense_elements == count)) {
        std::printf("fault: rank %d: the hybrid allreduce of %zu sent %llu elements dense, not some of them\n",
                    comm.rank(), count, static_cast<unsigned long long>(st.dense_elements));
        return false;
      }
      if (st.densities_exchanged != (round < 2)) {
        std::printf("fault: rank %d: call %d of the hybrid allreduce of %zu %s the densities\n", comm.rank(),
                    round + 1, count, round < 2 ? "did not exchange" : "exchanged");
        return false;
      }
    }
  return true;
}

// `calls` hybrid allreduces of `count` f32 in place, each rank's blocks non-zero with `percent`%
// chance (a hash of block and rank: the ranks' supports independent, the same on every call);
// every call must sum right, and from call `settled_from` on send `settled_dense` elements
// dense. `what` names the check in its failure.
bool hybrid_plan_settles(sparcoll::Communicator& comm, const char* what, std::size_t count, int percent, int calls,
                         int settled_from, std::size_t settled_dense) {
  const std::size_t blocks = count / 256;
  const auto nonzero_on = [percent](std::uint64_t block, int rank) {
    std::uint64_t h = (block + 1) * 0x9E3779B97F4A7C15ull ^ (static_cast<std::uint64_t>(rank) + 1) * 0xC2B2AE3D27D4EB4Full;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    return h % 100 < static_cast<std::uint64_t>(percent);
  };
  std::vector<float> v(count);
  for (int call = 1; call <= calls; ++call) {
    std::fill(v.begin(), v.end(), 0.0f);
    for (std::size_t b = 0; b < blocks; ++b)
      if (nonzero_on(b, comm.rank())) v[b * 256 + 255] = static_cast<float>(comm.rank() + 1);
    sparcoll::Request r = comm.iallreduce(v.data(), v.data(), count, DataType::f32, ReduceOp::sum,
                                          sparcoll::Algorithm::hybrid);
    r.wait();
    for (std::size_t b = 0; b < blocks; ++b) {
      float want = 0.0f;
      for (int p = 0; p < comm.size(); ++p)
        if (nonzero_on(b, p)) want += static_cast<float>(p + 1);
      if (v[b * 256 + 255] != want) {
        std::printf("fault: rank %d: call %d of the %s hybrid allreduce gave a wrong sum in block %zu\n", comm.rank(),
                    call, what, b);
        return false;
      }
    }
    if (call >= settled_from && r.stats().dense_elements != settled_dense) {
      std::printf("fault: rank %d: call %d of the %s hybrid allreduce sent %llu of %zu elements dense, not %zu\n",
                  comm.rank(), call, what, static_cast<unsigned long long>(r.stats().dense_elements), count,
                  settled_dense);
      return false;
    }
  }
  return true;
}

// A tensor whose every stripe is well below the dense threshold in union (3 ranks, 9% of the
// blocks each: a union of 25% against 32 over shm at 3 ranks and 65 over a wire), but whose
// 32-block samples send some stripes dense at the exchange (over shm). The plan follows the
// results (the block-sparse stripes' exact union counts, the dense ones sampled at a new phase
// each call), so by the 12th call every stripe goes block-sparse.
bool hybrid_plan_settles_on_the_union(sparcoll::Communicator& comm) {
  return hybrid_plan_settles(comm, "settling", std::size_t{4} << 20, 9, 16, 12, 0);
}

// The other way: a tensor whose every stripe is well above the dense threshold in union (3
// ranks, 35% of the blocks each: a union of 72% against 65 over a wire, 60 with the hysteresis;
// 32 over shm), 20 MiB, so in stripes on every transport. Its dense stripes' results are sampled,
// 32 blocks each, and over a wire some of the 40 samples fell below 60% on most calls, which sent
// that stripe to the engine beside the ring (1.3x the call's time at 4 ranks). A dense stripe now
// leaves only on an exact count, so from the fifth call every element goes dense.
bool hybrid_dense_plan_stays_dense(sparcoll::Communicator& comm) {
  const std::size_t count = std::size_t{5} << 20;
  return hybrid_plan_settles(comm, "dense", count, 35, 14, 5, count);
}

// A tensor sent whole by block recursive doubling counts its result's blocks in the union the
// algorithm ends with, not in a sample of the result. 1 MiB, 1% of the blocks on each rank: the
// third call plans from the kept masks; the fourth, dense, still does (block recursive doubling,
// every block), and its result, a union of every block, calls for the dense algorithm: the fifth
// call exchanges again and sends the tensor dense. Every call sums right.
bool hybrid_whole_tensor_sees_its_union(sparcoll::Communicator& comm) {
  const std::size_t count = (std::size_t{1} << 18) + 1024, blocks = count / 256;
  const auto value_of = [&](std::size_t i, int rank, bool dense) {
    const bool nonzero = dense || (i / 256 * 2654435761u + static_cast<std::size_t>(rank) * 40503u) % 100 == 0;
    return nonzero ? static_cast<float>(rank + 1) : 0.0f;
  };
  std::vector<float> v(count);
  for (int call = 1; call <= 5; ++call) {
    const bool dense = call >= 4;
    for (std::size_t i = 0; i < count; ++i) v[i] = value_of(i, comm.rank(), dense);
    sparcoll::Request r = comm.iallreduce(v.data(), v.data(), count, DataType::f32, ReduceOp::sum,
                                          sparcoll::Algorithm::hybrid);
    r.wait();
    for (std::size_t i = 0; i < count; ++i) {
      float want = 0.0f;
      for (int p = 0; p < comm.size(); ++p) want += value_of(i, p, dense);
      if (v[i] != want) {
        std::printf("fault: rank %d: call %d of the 1 MiB hybrid allreduce gave a wrong sum at %zu\n", comm.rank(),
                    call, i);
        return false;
      }
    }
    const sparcoll::OpStats st = r.stats();
    const bool want_exchange = call <= 2 || call == 5, want_dense = call == 5;
    if (st.densities_exchanged != want_exchange || (st.dense_elements == count) != want_dense) {
      std::printf("fault: rank %d: call %d of the 1 MiB hybrid allreduce (of %zu blocks) %s the densities and sent "
                  "%llu elements dense\n",
                  comm.rank(), call, blocks, st.densities_exchanged ? "exchanged" : "did not exchange",
                  static_cast<unsigned long long>(st.dense_elements));
      return false;
    }
  }
  return true;
}

// The same for a tensor the exchanged masks send in stripes: 3 MiB whose non-zero blocks, on
// every rank, are exactly the ones the masks sample (32 of each stripe's 512, 6%). The masks see every stripe full, so the first calls send the tensor in stripes, all
// of them dense; the results, sampled at other blocks, call for block-sparse stripes, and the
// calls that plan from what the shape keeps follow them: the last two of five calls send nothing
// dense. Every call sums right.
bool hybrid_stripes_planned_from_masks_follow_the_results(sparcoll::Communicator& comm) {
  const std::size_t count = (std::size_t{3} << 18) - 512, blocks = count / 256;
  constexpr std::size_t kStripeBlocks = 512, kSamples = 32;  // algo::stripe_blocks_for, algo::kStripeSamples
  std::vector<char> sampled(blocks, 0);
  for (std::size_t first = 0; first < blocks; first += kStripeBlocks) {
    const std::size_t n = std::min(kStripeBlocks, blocks - first);
    for (std::size_t i = 0; i < kSamples; ++i) sampled[first + (n * i + n / 2) / kSamples] = 1;
  }
  std::vector<float> v(count);
  for (int call = 1; call <= 5; ++call) {
    std::fill(v.begin(), v.end(), 0.0f);
    for (std::size_t b = 0; b < blocks; ++b)
      if (sampled[b]) v[b * 256 + 7] = static_cast<float>(comm.rank() + 1);
    sparcoll::Request r = comm.iallreduce(v.data(), v.data(), count, DataType::f32, ReduceOp::sum,
                                          sparcoll::Algorithm::hybrid);
    r.wait();
    const float want = static_cast<float>(comm.size() * (comm.size() + 1) / 2);
    for (std::size_t i = 0; i < count; ++i)
      if (v[i] != (i % 256 == 7 && sampled[i / 256] ? want : 0.0f)) {
        std::printf("fault: rank %d: call %d of the hybrid allreduce in stripes planned from masks gave a wrong sum at %zu\n",
                    comm.rank(), call, i);
        return false;
      }
    if (call >= 4 && r.stats().dense_elements != 0) {
      std::printf("fault: rank %d: call %d of the hybrid allreduce in stripes planned from masks still sent %llu elements "
                  "dense\n",
                  comm.rank(), call, static_cast<unsigned long long>(r.stats().dense_elements));
      return false;
    }
  }
  return true;
}

// A tensor from SPARCOLL_HYBRID_MIN_BYTES (2 MiB) up goes whole when block recursive doubling is
// picked, else in stripes. 3 MiB of f32, three
// times each: 1% of the blocks non-zero on each rank (drawn apart by rank) goes whole by block
// recursive doubling (nothing dense, no block through the block-sparse engine); the first half
// dense and 1% of the second half's blocks does not (block recursive doubling would send half the
// tensor and then most of it again), and goes in stripes, the dense half dense and the sparse
// half through the engine. At 12 MiB, 7% of the blocks goes whole over a wire (block recursive
// doubling's estimate at 3 ranks, 16% of the ring's bytes, within a wire's 45%) and in stripes
// over shm (above its 10%; a union of 20%, all of them block-sparse), and 0.3% whole over both,
// however few its bytes. At 20 MiB, above kWireLargeTensorBytes, 5% goes in stripes over both
// (11% of the ring's bytes, above a wire's 8 there and shm's 10) and 0.3% whole. Every call's
// sum is checked. Each kind of data has a shape of its own (a count not of
// kHybridShapes), so that no call plans from another data's kept table.
bool hybrid_goes_whole_only_when_sparse(sparcoll::Communicator& comm) {
  // Whether `block` of `rank` is one of the permille non-zero ones (a mixing hash: the samples
  // of the plan see about that density).
  const auto sparse_block = [](std::size_t block, int rank, std::uint64_t permille) {
    std::uint64_t x = block * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(rank) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 31)) * 0x94D049BB133111EBull;
    return (x ^ (x >> 29)) % 1000 < permille;
  };
  struct Kind {
    const char* name;
    std::size_t count;
    std::uint64_t permille;  // of the blocks non-zero on each rank (drawn apart by rank)
    bool half_dense;         // and the first half of the tensor
    bool whole;              // goes whole by block recursive doubling, else in stripes
  };
  const bool over_shm = comm.transport_name() == "shm";
  const Kind kinds[] = {{"sparse 3 MiB", (std::size_t{3} << 18) + 256, 10, false, true},
                        {"half dense 3 MiB", (std::size_t{3} << 18) + 512, 10, true, false},
                        {"7% sparse 12 MiB", (std::size_t{3} << 20) + 256, 70, false, !over_shm},
                        {"0.3% sparse 12 MiB", (std::size_t{3} << 20) + 512, 3, false, true},
                        {"5% sparse 20 MiB", (std::size_t{5} << 20) + 256, 50, false, false},
                        {"0.3% sparse 20 MiB", (std::size_t{5} << 20) + 512, 3, false, true}};
  for (const Kind& kind : kinds)
    for (int call = 0; call < 3; ++call) {
      const std::size_t count = kind.count, blocks = count / 256;
      const auto value_of = [&](std::size_t i, int rank) {
        const bool nonzero = (kind.half_dense && i < count / 2) || sparse_block(i / 256, rank, kind.permille);
        return nonzero ? static_cast<float>(rank + 1 + i % 3) : 0.0f;
      };
      std::vector<float> v(count);
      for (std::size_t i = 0; i < count; ++i) v[i] = value_of(i, comm.rank());
      sparcoll::Request r = comm.iallreduce(v.data(), v.data(), count, DataType::f32, ReduceOp::sum,
                                            sparcoll::Algorithm::hybrid);
      r.wait();
      for (std::size_t i = 0; i < count; ++i) {
        float want = 0.0f;
        for (int p = 0; p < comm.size(); ++p) want += value_of(i, p);
        if (v[i] != want) {
          std::printf("fault: rank %d: the %s hybrid allreduce gave a wrong sum at %zu\n", comm.rank(), kind.name, i);
          return false;
        }
      }
      const sparcoll::OpStats st = r.stats();
      const bool whole_by_rd = st.dense_elements == 0 && st.blocks_sent == 0;
      const bool split = kind.half_dense ? st.dense_elements > 0 && st.dense_elements < count && st.blocks_sent > 0
                                         : st.dense_elements == 0 && st.blocks_sent > 0;
      if (kind.whole ? !whole_by_rd : !split) {
        std::printf("fault: rank %d: call %d of the %s hybrid allreduce over %s sent %llu elements dense and %llu "
                    "blocks through the engine (of %zu)\n",
                    comm.rank(), call + 1, kind.name, comm.transport_name().c_str(),
                    static_cast<unsigned long long>(st.dense_elements), static_cast<unsigned long long>(st.blocks_sent),
                    blocks);
        return false;
      }
    }
  return true;
}

// The culprit of ring_die: forks before joining; the child is the rank (it joins, starts a large
// ring allreduce and is SIGKILLed in the middle of it), the parent only waits for it and exits 0
// so the launcher keeps the survivors running. Returns in the child only.
void fork_victim(int rank) {
  const pid_t child = fork();
  if (child < 0) {
    std::perror("fork");
    std::exit(1);
  }
  if (child == 0) return;
  int status = 0;
  while (waitpid(child, &status, 0) < 0) {
  }
  std::printf("fault: rank %d: the rank's process died by %s\n", rank,
              WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL ? "SIGKILL" : "something else");
  std::fflush(stdout);
  std::exit(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL ? 0 : 1);
}

// For the count mismatch of broadcast, only the ranks that receive from a rank with another
// count can see it: the others may finish the broadcast correctly.
// The culprit of killed_in_shm_setup: a thread that SIGKILLs the process as soon as its own
// shm segment's name appears in /dev/shm (inotify tells it within microseconds, before the few
// store round trips the rest of the setup takes), so nothing of its own can remove the name.
void kill_when_own_segment_appears() {
  const int watch = inotify_init1(IN_CLOEXEC);
  if (watch < 0 || inotify_add_watch(watch, "/dev/shm", IN_CREATE) < 0) {
    std::printf("fault: cannot watch /dev/shm: %s\n", std::strerror(errno));
    std::exit(1);
  }
  char mine_text[32];
  std::snprintf(mine_text, sizeof mine_text, "-%d-", static_cast<int>(getpid()));
  const std::string mine = mine_text;
  std::thread([watch, mine] {
    alignas(inotify_event) char events[4096];
    for (;;) {
      const ssize_t n = read(watch, events, sizeof events);
      for (ssize_t at = 0; at < n;) {
        const auto* event = reinterpret_cast<const inotify_event*>(events + at);
        const std::string name = event->len ? event->name : "";
        if (name.rfind("sparcoll-", 0) == 0 && name.find(mine) != std::string::npos) raise(SIGKILL);
        at += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
      }
    }
  }).detach();
}

bool may_succeed(const std::string& scenario, bool culprit) {
  return (scenario == "broadcast_count_mismatch" || scenario == "broadcast_bad_root") && !culprit;
}



}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: sparcoll-fault SCENARIO\n");
    return 2;
  }
  const std::string scenario = argv[1];
  const int rank = rank_from_env();
  const bool culprit = rank == 1;

  // Scenarios that break the setup itself.
  if (scenario == "wrong_token") {
    // The store turns the culprit away and nobody else: the others wait for it until the
    // connect timeout, and their error carries the store's note on the rejected hello.
    if (culprit) setenv("SPARCOLL_JOB_TOKEN", "not-the-job-token", 1);
    setenv("SPARCOLL_CONNECT_TIMEOUT_MS", "2000", 1);
  }
  if (scenario == "unreachable_store") {
    setenv("SPARCOLL_STORE", "127.0.0.1:1", 1);
    setenv("SPARCOLL_STORE_SERVER", "external", 1);
    setenv("SPARCOLL_CONNECT_TIMEOUT_MS", "700", 1);
  }
  if (scenario == "bad_option") setenv("SPARCOLL_LANES", "12abc", 1);
  if (scenario == "bad_range") setenv("SPARCOLL_FUSION", "0", 1);
  if (scenario == "config_mismatch" && culprit) setenv("SPARCOLL_LANES", "32", 1);
  if (scenario == "ring_segment_mismatch" && culprit) setenv("SPARCOLL_RING_SEGMENT_BYTES", "65536", 1);
  if (scenario == "unknown_variable") setenv("SPARCOLL_LANE", "8", 1);
  if (scenario == "ring_die" && culprit) fork_victim(rank);
  if (scenario == "killed_in_shm_setup") {
    // Every rank says its pid, so the test can look for segments of this job left in /dev/shm.
    std::printf("fault: rank %d: pid %d\n", rank, static_cast<int>(getpid()));
    std::fflush(stdout);
    setenv("SPARCOLL_CONNECT_TIMEOUT_MS", "3000", 1);
    if (culprit) kill_when_own_segment_appears();
  }

  std::unique_ptr<sparcoll::Communicator> comm;
  try {
    comm = std::make_unique<sparcoll::Communicator>(sparcoll::Communicator::from_env());
  } catch (const sparcoll::Error& e) {
    if (scenario == "wrong_token") {
      if (culprit) return report(rank, e, ErrorCode::auth_failure, "job token");
      if (std::string(e.what()).find("claiming to be 'rank 1' presented a wrong job token") == std::string::npos) {
        std::printf("fault: rank %d: the timeout does not carry the store's note: %s\n", rank, e.what());
        return 1;
      }
      return report(rank, e, ErrorCode::timeout, "rank 1 did not join");
    }
    if (scenario == "unreachable_store") return report(rank, e, ErrorCode::timeout, "127.0.0.1:1");
    if (scenario == "bad_option") return report(rank, e, ErrorCode::invalid_argument, "SPARCOLL_LANES");
    if (scenario == "bad_range") return report(rank, e, ErrorCode::invalid_argument, "SPARCOLL_FUSION");
    if (scenario == "config_mismatch") return report(rank, e, ErrorCode::mismatch, "SPARCOLL_LANES");
    if (scenario == "ring_segment_mismatch") return report(rank, e, ErrorCode::mismatch, "SPARCOLL_RING_SEGMENT_BYTES");
    if (scenario == "killed_in_shm_setup") {
      // The shm setup waits for the dead rank until its deadline.
      return report(rank, e, e.code() == ErrorCode::peer_failure ? ErrorCode::peer_failure : ErrorCode::timeout,
                    "rank 1");
    }
    std::printf("fault: rank %d: unexpected setup failure: %s\n", rank, e.what());
    return 1;
  }
  if (scenario == "wrong_token" || scenario == "unreachable_store" || scenario == "bad_option" ||
      scenario == "bad_range" || scenario == "config_mismatch" || scenario == "ring_segment_mismatch" ||
      scenario == "killed_in_shm_setup") {
    std::printf("fault: rank %d: setup unexpectedly succeeded\n", rank);
    return 1;
  }
  if (scenario == "unknown_variable") return check_still_works(*comm);
  if (scenario == "exit_after_op") {
    // The culprit leaves the job without leaving its communicator, right after a collective
    // that succeeded: the others' teardown must see it gone, not wait for it (it waited the
    // whole connect timeout, 30 s).
    std::vector<float> v(4096, 1.0f);
    comm->allreduce(v.data(), v.data(), v.size(), DataType::f32, ReduceOp::sum);
    if (culprit) {
      std::printf("fault: rank %d: exits without leaving\n", rank);
      std::fflush(stdout);
      _exit(0);
    }
    const auto t0 = std::chrono::steady_clock::now();
    comm.reset();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("fault: rank %d: left after %.2f s\n", rank, s);
    return s < 3.0 ? 0 : 1;
  }

  std::vector<float> data(4096, 1.0f);
  try {
    // The default algorithm (auto) first, then block-sparse named explicitly.
    if (scenario == "count_mismatch") {
      comm->allreduce(data.data(), data.data(), culprit ? 4001 : 4000, DataType::f32, ReduceOp::sum);
    } else if (scenario == "big_and_small_count") {
      // auto picks block recursive doubling for one count and the hybrid for the other: they must
      // still meet in one collective and fail it, not run out of step.
      std::vector<float> big(1 << 20, 1.0f);
      comm->allreduce(big.data(), big.data(), culprit ? big.size() : 1000, DataType::f32, ReduceOp::sum);
    } else if (scenario == "block_sparse_count_mismatch") {
      comm->allreduce(data.data(), data.data(), culprit ? 4001 : 4000, DataType::f32, ReduceOp::sum,
                      sparcoll::Algorithm::block_sparse);
    } else if (scenario == "block_sparse_dtype_mismatch") {
      comm->allreduce(data.data(), data.data(), 1000, culprit ? DataType::f16 : DataType::f32, ReduceOp::sum,
                      sparcoll::Algorithm::block_sparse);
    } else if (scenario == "dtype_mismatch") {
      comm->allreduce(data.data(), data.data(), 1000, culprit ? DataType::f16 : DataType::f32, ReduceOp::sum);
    } else if (scenario == "op_mismatch") {
      comm->allreduce(data.data(), data.data(), 1000, DataType::f32, culprit ? ReduceOp::max : ReduceOp::sum);
    } else if (scenario == "out_of_memory") {
      // A count whose block bitmap alone (2^48 blocks) cannot be allocated on the culprit: its
      // peers once waited for it until their deadline.
      comm->allreduce(data.data(), data.data(), culprit ? std::size_t{1} << 56 : 4000, DataType::f32, ReduceOp::sum);
    } else if (scenario == "null_buffer") {
      comm->allreduce(culprit ? nullptr : data.data(), data.data(), 1000, DataType::f32, ReduceOp::sum);
    } else if (scenario == "hybrid_kept_plan_null_buffer") {
      // Every rank plans the next call of a shape from its kept table, but the culprit's call is
      // refused before it plans: every rank fails it, forgets its tables, and the calls after
      // it (the same shapes) still meet and sum right (algo/plan_reuse.hpp).
      if (!hybrid_sums_right(*comm, 4) || !hybrid_plan_settles_on_the_union(*comm) ||
          !hybrid_dense_plan_stays_dense(*comm) || !hybrid_goes_whole_only_when_sparse(*comm) ||
          !hybrid_stripes_planned_from_masks_follow_the_results(*comm) || !hybrid_whole_tensor_sees_its_union(*comm))
        return 1;
      std::vector<float> v(kHybridShapes[0], 1.0f);
      comm->allreduce(culprit ? nullptr : v.data(), v.data(), v.size(), DataType::f32, ReduceOp::sum,
                      sparcoll::Algorithm::hybrid);
    } else if (scenario == "misaligned") {
      auto* bytes = reinterpret_cast<char*>(data.data());
      void* buf = culprit ? static_cast<void*>(bytes + 1) : static_cast<void*>(data.data());
      comm->allreduce(buf, buf, 1000, DataType::f32, ReduceOp::sum);
    } else if (scenario == "die") {
      std::vector<float> big(std::size_t{1} << 22, 1.0f);
      if (culprit) {
        sparcoll::Request r = comm->iallreduce(big.data(), big.data(), big.size(), DataType::f32, ReduceOp::sum);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        std::printf("fault: rank %d: dying mid-operation\n", rank);
        std::fflush(stdout);
        _exit(0);
      }
      // The survivors start after the culprit died with its op in flight, and its op cannot
      // complete without theirs: the death always comes mid-operation. (Starting together, a
      // quiet machine finished all 16 MiB within the culprit's 20 ms, and nothing failed.)
      std::this_thread::sleep_for(std::chrono::milliseconds(60));
      const auto t0 = std::chrono::steady_clock::now();
      try {
        comm->allreduce(big.data(), big.data(), big.size(), DataType::f32, ReduceOp::sum);
      } catch (const sparcoll::Error& e) {
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::printf("fault: rank %d: error after %.2f s\n", rank, s);
        // A survivor that noticed the death before it even started the op gets `broken`
        // (carrying the same cause) from the call itself.
        return report(rank, e, e.code() == ErrorCode::broken ? ErrorCode::broken : ErrorCode::peer_failure, "rank 1");
      }
    } else if (scenario == "ring_count_mismatch") {
      comm->allreduce(data.data(), data.data(), culprit ? 4001 : 4000, DataType::f32, ReduceOp::sum,
                      sparcoll::Algorithm::ring);
    } else if (scenario == "ring_big_count_mismatch") {
      // Megabytes of the ring's first step are queued for the right neighbour when the mismatch
      // fails it, read in place from this buffer over tcp, which is unmapped as the call throws:
      // the queued frames must not read it afterwards (the next collectives would fail). In
      // segments of 2 MiB the culprit's count is a 9th segment of 1 element after 8 alike in
      // size: the count the first step carries fails it (ring.cpp).
      const std::size_t n = std::size_t{1} << 22;
      std::vector<float> big(n + 1, 1.0f);
      comm->allreduce(big.data(), big.data(), culprit ? n + 1 : n, DataType::f32, ReduceOp::sum,
                      sparcoll::Algorithm::ring);
    } else if (scenario == "allgather_count_mismatch") {
      std::vector<float> all(std::size_t{1001} * static_cast<std::size_t>(comm->size()));
      comm->allgather(data.data(), all.data(), culprit ? 1001 : 1000, DataType::f32);
    } else if (scenario == "reduce_scatter_count_mismatch") {
      std::vector<float> in(std::size_t{1001} * static_cast<std::size_t>(comm->size()), 1.0f), out(1001);
      comm->reduce_scatter(in.data(), out.data(), culprit ? 1001 : 1000, DataType::f32, ReduceOp::sum);
    } else if (scenario == "broadcast_count_mismatch") {
      comm->broadcast(data.data(), culprit ? 4001 : 4000, DataType::f32, 0);
    } else if (scenario == "broadcast_bad_root") {
      comm->broadcast(data.data(), 1000, DataType::f32, culprit ? comm->size() : 0);
    } else if (scenario == "broadcast_root_disagree") {
      // Both roots are valid ranks: only comparing them across ranks can catch it (every rank
      // once returned success, with different data).
      comm->broadcast(data.data(), 1000, DataType::f32, culprit ? 1 : 0);
    } else if (scenario == "broadcast_skipped") {
      // The culprit never calls it: no rank may return success for a broadcast that did not
      // reach every rank.
      if (culprit) {
        std::this_thread::sleep_for(std::chrono::milliseconds(3000));
        std::printf("fault: rank %d: never called the broadcast\n", rank);
        return 0;
      }
      comm->broadcast(data.data(), 1000, DataType::f32, 0);
    } else if (scenario == "reduce_count_mismatch") {
      std::vector<float> out(4001);
      comm->reduce(data.data(), out.data(), culprit ? 4001 : 4000, DataType::f32, ReduceOp::sum, 0);
    } else if (scenario == "gather_count_mismatch") {
      std::vector<float> all(std::size_t{1001} * static_cast<std::size_t>(comm->size()));
      comm->gather(data.data(), all.data(), culprit ? 1001 : 1000, DataType::f32, 0);
    } else if (scenario == "scatter_count_mismatch") {
      std::vector<float> all(std::size_t{1001} * static_cast<std::size_t>(comm->size()), 1.0f), out(1001);
      comm->scatter(all.data(), out.data(), culprit ? 1001 : 1000, DataType::f32, 0);
    } else if (scenario == "all_to_all_count_mismatch") {
      const auto n = static_cast<std::size_t>(comm->size());
      std::vector<float> in(4004 * n, 1.0f), out(4004 * n);
      comm->all_to_all(in.data(), out.data(), culprit ? 4004 : 4000);
    } else if (scenario == "reduce_root_disagree" || scenario == "gather_root_disagree" ||
               scenario == "scatter_root_disagree") {
      // Both roots are valid ranks: the roots every fragment carries must catch it at once (no
      // rank may wait for its deadline, nor return success).
      const int root = culprit ? 1 : 0;
      std::vector<float> all(std::size_t{1000} * static_cast<std::size_t>(comm->size()), 1.0f), out(1000);
      if (scenario == "reduce_root_disagree") comm->reduce(data.data(), out.data(), 1000, DataType::f32, ReduceOp::sum, root);
      if (scenario == "gather_root_disagree") comm->gather(data.data(), all.data(), 1000, DataType::f32, root);
      if (scenario == "scatter_root_disagree") comm->scatter(all.data(), out.data(), 1000, DataType::f32, root);
    } else if (scenario == "rooted_bad_root") {
      std::vector<float> out(1000);
      comm->reduce(data.data(), out.data(), 1000, DataType::f32, ReduceOp::max, culprit ? comm->size() : 0);
    } else if (scenario == "coalesced_counts_differ") {
      // The same total cut differently: only comparing the counts across ranks can catch it.
      std::vector<float> a(600, 1.0f), b(600, 1.0f);
      const std::size_t counts[2] = {culprit ? std::size_t{500} : 400, culprit ? std::size_t{500} : 600};
      const void* send[2] = {a.data(), b.data()};
      void* recv[2] = {a.data(), b.data()};
      comm->allreduce_coalesced(send, recv, counts, 2, DataType::f32, ReduceOp::sum);
    } else if (scenario == "coalesced_null_buffer") {
      std::vector<float> a(100, 1.0f), all(100 * static_cast<std::size_t>(comm->size()));
      const std::size_t counts[2] = {100, 100};
      const void* send[2] = {a.data(), a.data()};
      void* recv[2] = {all.data(), culprit ? nullptr : all.data()};
      comm->allgather_coalesced(send, recv, counts, 2, DataType::f32);
    } else if (scenario == "p2p_null_buffer") {
      std::vector<float> all(std::size_t{1000} * static_cast<std::size_t>(comm->size()));
      comm->allgather(culprit ? nullptr : data.data(), all.data(), 1000, DataType::f32);
    } else if (scenario == "ring_die") {
      std::vector<float> big(std::size_t{1} << 24, 1.0f);
      comm->barrier();  // every rank starts the allreduce at once, so the death is mid-operation
      if (culprit) {
        sparcoll::Request r = comm->iallreduce(big.data(), big.data(), big.size(), DataType::f32, ReduceOp::sum,
                                               sparcoll::Algorithm::ring);
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        std::printf("fault: rank %d: SIGKILL mid-operation\n", rank);
        std::fflush(stdout);
        raise(SIGKILL);
      }
      const auto t0 = std::chrono::steady_clock::now();
      try {
        comm->allreduce(big.data(), big.data(), big.size(), DataType::f32, ReduceOp::sum, sparcoll::Algorithm::ring);
      } catch (const sparcoll::Error& e) {
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::printf("fault: rank %d: error after %.2f s\n", rank, s);
        if (s > 1.4) {  // SPARCOLL_DEADLINE_MS=1500 in fault_test.cpp: a death must be seen before
          std::printf("fault: rank %d: the death took the whole deadline to notice\n", rank);
          return 1;
        }
        return report(rank, e, e.code() == ErrorCode::broken ? ErrorCode::broken : ErrorCode::peer_failure, "rank 1");
      }
    } else if (scenario == "ring_hang") {
      if (culprit) {
        std::this_thread::sleep_for(std::chrono::milliseconds(3000));
        std::printf("fault: rank %d: never joined the op\n", rank);
        return 0;
      }
      comm->allreduce(data.data(), data.data(), data.size(), DataType::f32, ReduceOp::sum, sparcoll::Algorithm::ring);
    } else if (scenario == "hang") {
      if (culprit) {
        std::this_thread::sleep_for(std::chrono::milliseconds(3000));
        std::printf("fault: rank %d: never joined the op\n", rank);
        return 0;
      }
      comm->allreduce(data.data(), data.data(), data.size(), DataType::f32, ReduceOp::sum);
    } else if (scenario == "after_break") {
      // The culprit never joins; the others time out, then any further call must fail at once.
      if (culprit) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2500));
        return 0;
      }
      try {
        comm->allreduce(data.data(), data.data(), data.size(), DataType::f32, ReduceOp::sum);
      } catch (const sparcoll::Error&) {
      }
      comm->allreduce(data.data(), data.data(), data.size(), DataType::f32, ReduceOp::sum);
    } else {
      std::fprintf(stderr, "sparcoll-fault: unknown scenario %s\n", scenario.c_str());
      return 2;
    }
  } catch (const sparcoll::Error& e) {
    int rc = 1;
    if (scenario == "count_mismatch") rc = report(rank, e, ErrorCode::mismatch, "4001");
    else if (scenario == "big_and_small_count") rc = report(rank, e, ErrorCode::mismatch, "hybrid");
    else if (scenario == "block_sparse_count_mismatch") rc = report(rank, e, ErrorCode::mismatch, "4001");
    else if (scenario == "block_sparse_dtype_mismatch") rc = report(rank, e, ErrorCode::mismatch, "f16");
    else if (scenario == "dtype_mismatch") rc = report(rank, e, ErrorCode::mismatch, "f16");
    else if (scenario == "op_mismatch") rc = report(rank, e, ErrorCode::mismatch, "max");
    else if (scenario == "out_of_memory") rc = report(rank, e, ErrorCode::no_resource, "out of memory");
    else if (scenario == "null_buffer") rc = report(rank, e, ErrorCode::invalid_argument, culprit ? "sendbuf is null" : "rank 1");
    else if (scenario == "hybrid_kept_plan_null_buffer") {
      rc = report(rank, e, ErrorCode::invalid_argument, culprit ? "sendbuf is null" : "rank 1");
      if (rc == 0 && !hybrid_sums_right(*comm, 4)) return 1;
      if (rc == 0) std::printf("fault: rank %d: the hybrid still sums right\n", rank);
    }
    else if (scenario == "misaligned") rc = report(rank, e, ErrorCode::invalid_argument, culprit ? "not aligned" : "rank 1");
    else if (scenario == "ring_count_mismatch" || scenario == "ring_big_count_mismatch" ||
             scenario == "allgather_count_mismatch" ||
             scenario == "reduce_scatter_count_mismatch" || scenario == "broadcast_count_mismatch" ||
             scenario == "reduce_count_mismatch" || scenario == "gather_count_mismatch" ||
             scenario == "scatter_count_mismatch" || scenario == "all_to_all_count_mismatch")
      rc = report(rank, e, ErrorCode::mismatch, "differ across ranks");
    else if (scenario == "broadcast_bad_root")
      rc = report(rank, e, ErrorCode::invalid_argument, culprit ? "root 3 is not a rank" : "rank 1");
    else if (scenario == "broadcast_root_disagree" || scenario == "reduce_root_disagree" || scenario == "gather_root_disagree" ||
             scenario == "scatter_root_disagree")
      rc = report(rank, e, ErrorCode::mismatch, "root differs across ranks");
    else if (scenario == "rooted_bad_root")
      rc = report(rank, e, ErrorCode::invalid_argument, culprit ? "root 3 is not a rank" : "rank 1");
    else if (scenario == "broadcast_skipped")
      // The root waits for rank 1's data to come back as an acknowledgement and names it; rank 2
      // waits for the root's commit and names the root (or hears of its failure first).
      return report(rank, e, ErrorCode::timeout, rank == 0 ? "rank 1" : "rank 0");
    else if (scenario == "coalesced_counts_differ")
      rc = report(rank, e, ErrorCode::mismatch, "counts differ across ranks");
    else if (scenario == "coalesced_null_buffer")
      rc = report(rank, e, ErrorCode::invalid_argument, culprit ? "recv[1] is null with count 100" : "rank 1");
    else if (scenario == "p2p_null_buffer")
      rc = report(rank, e, ErrorCode::invalid_argument, culprit ? "sendbuf is null" : "rank 1");
    else if (scenario == "ring_hang") {
      // The right neighbour of the stalled rank waits for it; the others wait for a rank that
      // waits for it, and either time out themselves or hear of the first timeout.
      const bool neighbour = rank == 2;
      return report(rank, e, neighbour || e.code() == ErrorCode::timeout ? ErrorCode::timeout : ErrorCode::peer_failure,
                    neighbour ? "no data from rank 1" : "deadline passed");
    } else if (scenario == "hang") return report(rank, e, ErrorCode::timeout, "rank 1");
    else if (scenario == "after_break") return report(rank, e, ErrorCode::broken, "earlier failure");
    else std::printf("fault: rank %d: unexpected error: %s\n", rank, e.what());
    if (rc != 0) return rc;
    const bool p2p = scenario.rfind("ring_", 0) == 0 || scenario.rfind("allgather_", 0) == 0 ||
                     scenario.rfind("reduce_scatter_", 0) == 0 || scenario.rfind("broadcast_", 0) == 0 ||
                     scenario.rfind("p2p_", 0) == 0 || scenario.rfind("reduce_", 0) == 0 ||
                     scenario.rfind("gather_", 0) == 0 || scenario.rfind("scatter_", 0) == 0 ||
                     scenario.rfind("rooted_", 0) == 0 || scenario.rfind("all_to_all_", 0) == 0;
    return p2p ? check_p2p_still_works(*comm) : check_still_works(*comm);
  }
  if (may_succeed(scenario, culprit)) {
    std::printf("fault: rank %d: %s succeeded here (this rank cannot see the culprit's argument)\n", rank,
                scenario.c_str());
    return check_p2p_still_works(*comm);
  }
  std::printf("fault: rank %d: %s did not fail\n", rank, scenario.c_str());
  return 1;
}
