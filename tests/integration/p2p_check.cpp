// sparcoll-check-p2p: under sparcoll-run, send and recv outside collectives, every result
// checked: a ring exchange at several sizes (empty, odd, many fragments), one sender's messages
// taken in order, tags received out of order, receives from any source (the source reported),
// a receive posted long before its send, a pending receive that does not hold up a collective
// issued after it, many messages in flight both ways at once (back-pressure), a size mismatch
// (that recv fails, the communicator goes on), bad arguments (thrown at once), and with
// --expire, instead of those, a receive nobody sends to, which must fail with `timeout` by
// SPARCOLL_DEADLINE_MS (a short one), after which a collective still works. The other cases
// run under the default deadline: under a deadline of 800 ms the megabytes of the back-pressure
// case once timed out in a loaded test run, which says nothing about expiry.
// Prints "sparcoll-check-p2p: N cases passed" on rank 0; exits 1 naming the first failure.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "sparcoll/sparcoll.hpp"

namespace {

using sparcoll::Communicator;
using sparcoll::ErrorCode;
using sparcoll::Request;

int failures = 0;

void fail(const Communicator& comm, const std::string& what) {
  if (failures++ == 0) std::printf("sparcoll-check-p2p: rank %d: %s\n", comm.rank(), what.c_str());
}

// The bytes rank `from` sends as message `k` of a case: distinct per sender, message and position.
std::vector<std::byte> message(int from, int k, std::size_t bytes) {
  std::vector<std::byte> v(bytes);
  std::uint32_t x = 2166136261u ^ static_cast<std::uint32_t>(from * 7919 + k * 104729);
  for (std::size_t i = 0; i < bytes; ++i) {
    x = x * 1664525u + 1013904223u;
    v[i] = static_cast<std::byte>(x >> 24);
  }
  return v;
}

void expect_bytes(const Communicator& comm, const std::string& what, const std::vector<std::byte>& got,
                  const std::vector<std::byte>& want) {
  if (got != want) fail(comm, what + ": the received bytes differ from the sent ones");
}

// `call` must throw sparcoll::Error with `code` and a message containing `fragment`.
template <typename Call>
void expect_error(const Communicator& comm, const std::string& what, ErrorCode code, const char* fragment, Call call) {
  try {
    call();
  } catch (const sparcoll::Error& e) {
    if (e.code() != code || std::strstr(e.what(), fragment) == nullptr)
      fail(comm, what + ": got '" + e.what() + "', expected " + sparcoll::error_code_name(code) + " with '" + fragment +
                     "'");
    return;
  }
  fail(comm, what + ": did not fail");
}

// Nobody sends with tag 99: the recv fails by the deadline, and only it. Every rank waits one
// out at once, so none enters the next collective a deadline ahead of the others (that
// collective, under the same short deadline, would time out waiting for them).
void expire_a_recv(Communicator& comm, int right, int* cases) {
  std::vector<std::byte> in(8);
  const auto t0 = std::chrono::steady_clock::now();
  expect_error(comm, "expired recv", ErrorCode::timeout,
               ("recv from rank " + std::to_string(right) + " with tag 99: deadline passed").c_str(),
               [&] { comm.recv(in.data(), in.size(), right, 99); });
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (s > 5.0) fail(comm, "expired recv took " + std::to_string(s) + " s");
  ++*cases;
}

// The communicator still works on every rank (an allreduce of every rank's verdict), and rank 0
// prints the count; the exit code.
int finish(Communicator& comm, int cases) {
  int ok = failures == 0 ? 1 : 0;
  comm.allreduce(&ok, &ok, 1, sparcoll::DataType::i32, sparcoll::ReduceOp::min);
  if (ok != 1 && failures == 0) return 1;  // another rank failed and said why
  if (failures == 0 && comm.rank() == 0)
    std::printf("sparcoll-check-p2p: %d cases passed on %d ranks over %s\n", cases, comm.size(),
                comm.transport_name().c_str());
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const bool expire = argc > 1 && std::string(argv[1]) == "--expire";
  Communicator comm = Communicator::from_env();
  const int n = comm.size(), r = comm.rank();
  int cases = 0;

  // Bad arguments: thrown here, nothing started (on one rank too: nobody waits for them).
  std::vector<std::byte> buf(16);
  expect_error(comm, "peer out of range", ErrorCode::invalid_argument, "is not a rank",
               [&] { comm.send(buf.data(), buf.size(), n, 0); });
  expect_error(comm, "peer itself", ErrorCode::invalid_argument, "is this rank itself",
               [&] { comm.send(buf.data(), buf.size(), r, 0); });
  expect_error(comm, "negative tag", ErrorCode::invalid_argument, "tag -3 is negative",
               [&] { comm.recv(buf.data(), buf.size(), sparcoll::kAnySource, -3); });
  expect_error(comm, "null buffer", ErrorCode::invalid_argument, "the buffer is null",
               [&] { comm.recv(nullptr, 8, (r + 1) % n == r ? sparcoll::kAnySource : (r + 1) % n, 0); });
  cases += 4;
  if (n == 1) {
    std::printf("sparcoll-check-p2p: %d cases passed on 1 rank over %s\n", cases, comm.transport_name().c_str());
    return failures == 0 ? 0 : 1;
  }
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  if (expire) {
    expire_a_recv(comm, right, &cases);
    return finish(comm, cases);
  }

  // A ring exchange: everyone sends right and receives from the left, at once.
  for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{4099}, std::size_t{3} << 20}) {
    const std::vector<std::byte> out = message(r, 0, bytes);
    std::vector<std::byte> in(bytes, std::byte{0x7b});
    int source = -2;
    Request rr = comm.irecv(in.data(), in.size(), left, 7, &source);
    Request rs = comm.isend(out.data(), out.size(), right, 7);
    rs.wait();
    rr.wait();
    expect_bytes(comm, "ring exchange of " + std::to_string(bytes) + " bytes", in, message(left, 0, bytes));
    if (source != left) fail(comm, "ring exchange: source " + std::to_string(source));
    ++cases;
  }

  // One sender's messages with one tag are taken in the order it sent them.
  constexpr int kInOrder = 20;
  if (r == 0) {
    std::vector<std::vector<std::byte>> out;
    std::vector<Request> sends;
    for (int k = 0; k < kInOrder; ++k) out.push_back(message(0, k, 1000 + 37 * k));
    for (int k = 0; k < kInOrder; ++k) sends.push_back(comm.isend(out[k].data(), out[k].size(), 1, 3));
    for (Request& s : sends) s.wait();
  } else if (r == 1) {
    for (int k = 0; k < kInOrder; ++k) {
      std::vector<std::byte> in(1000 + 37 * k);
      comm.recv(in.data(), in.size(), 0, 3);
      expect_bytes(comm, "in-order message " + std::to_string(k), in, message(0, k, in.size()));
    }
  }
  ++cases;

  // Tags received in another order than sent: the first waits, kept whole, for its receive.
  if (r == 0) {
    const auto a = message(0, 1, 5000), b = message(0, 2, 70000);
    comm.send(a.data(), a.size(), 1, 11);
    comm.send(b.data(), b.size(), 1, 12);
  } else if (r == 1) {
    std::vector<std::byte> a(5000), b(70000);
    comm.recv(b.data(), b.size(), 0, 12);
    comm.recv(a.data(), a.size(), 0, 11);
    expect_bytes(comm, "tag 12 before tag 11", b, message(0, 2, 70000));
    expect_bytes(comm, "tag 11 after tag 12", a, message(0, 1, 5000));
  }
  ++cases;

  // From any source: rank 0 takes one message from every other rank, each naming its sender.
  if (r == 0) {
    std::vector<bool> seen(static_cast<std::size_t>(n), false);
    for (int k = 1; k < n; ++k) {
      std::vector<std::byte> in(333);
      int source = -2;
      comm.recv(in.data(), in.size(), sparcoll::kAnySource, 5, &source);
      if (source < 1 || source >= n || seen[static_cast<std::size_t>(source)]) {
        fail(comm, "any source: source " + std::to_string(source));
        continue;
      }
      seen[static_cast<std::size_t>(source)] = true;
      expect_bytes(comm, "any source from rank " + std::to_string(source), in, message(source, 5, 333));
    }
  } else {
    const auto out = message(r, 5, 333);
    comm.send(out.data(), out.size(), 0, 5);
  }
  ++cases;

  // A receive posted long before the send: the message lands straight in its buffer.
  if (r == 1) {
    std::vector<std::byte> in(200000);
    comm.recv(in.data(), in.size(), 0, 8);
    expect_bytes(comm, "recv posted first", in, message(0, 8, 200000));
  } else if (r == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    const auto out = message(0, 8, 200000);
    comm.send(out.data(), out.size(), 1, 8);
  }
  ++cases;

  // A pending receive does not hold up a collective issued after it: rank 1 sends only after
  // the allreduce, which rank 0 issues after its receive.
  {
    std::vector<std::byte> in(64);
    Request pending;
    if (r == 0) pending = comm.irecv(in.data(), in.size(), 1, 9);
    float x = 1.0f;
    comm.allreduce(&x, &x, 1, sparcoll::DataType::f32, sparcoll::ReduceOp::sum);
    if (x != static_cast<float>(n)) fail(comm, "allreduce beside a pending recv: " + std::to_string(x));
    if (r == 1) {
      const auto out = message(1, 9, 64);
      comm.send(out.data(), out.size(), 0, 9);
    }
    if (r == 0) {
      pending.wait();
      expect_bytes(comm, "recv pending across an allreduce", in, message(1, 9, 64));
    }
    ++cases;
  }

  // Many messages in flight both ways at once: more than the channels hold (back-pressure).
  {
    constexpr int kMany = 48;
    constexpr std::size_t kBytes = 96 * 1024;
    std::vector<std::vector<std::byte>> out, in(kMany, std::vector<std::byte>(kBytes));
    std::vector<Request> requests;
    for (int k = 0; k < kMany; ++k) out.push_back(message(r, 100 + k, kBytes));
    for (int k = 0; k < kMany; ++k) requests.push_back(comm.irecv(in[k].data(), kBytes, left, 20 + k % 3));
    for (int k = 0; k < kMany; ++k) requests.push_back(comm.isend(out[k].data(), kBytes, right, 20 + k % 3));
    for (Request& q : requests) q.wait();
    // Per tag, in order: receive k of tag t holds the sender's k-th message of tag t.
    for (int k = 0; k < kMany; ++k) expect_bytes(comm, "many in flight, message " + std::to_string(k), in[k],
                                                 message(left, 100 + k, kBytes));
    ++cases;
  }

  // A size mismatch fails that recv alone; the sender's send succeeds; the communicator goes on.
  if (r == 0) {
    std::vector<std::byte> in(50);
    expect_error(comm, "size mismatch", ErrorCode::mismatch, "rank 1 sent 100 bytes, this rank receives 50",
                 [&] { comm.recv(in.data(), in.size(), 1, 4); });
  } else if (r == 1) {
    const auto out = message(1, 4, 100);
    comm.send(out.data(), out.size(), 0, 4);
  }
  ++cases;

  return finish(comm, cases);
}
