// Completes the process group's Works: one thread waits on sparcoll requests in issue order and
// then runs each entry's completion (copy results out, finish the Work, complete its Future).
//
// Why a thread and not polling in Work::isCompleted()/wait(): DDP's reducer waits on the Work's
// c10::ivalue::Future, never on the Work, so nothing would ever poll; the thread sleeps in
// Request::wait() (a futex), so it costs no CPU while collectives run. Torch-free on purpose:
// this file compiles in a second, unlike anything that includes ATen.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <sparcoll/communicator.hpp>

namespace sparcoll_torch {

class CompletionQueue {
 public:
  // Gets nullptr when every request succeeded, else a std::runtime_error whose message is
  // `what` followed by the first failure. Runs on the completion thread.
  using Done = std::function<void(std::exception_ptr)>;

  CompletionQueue();
  ~CompletionQueue();  // completes everything queued, then stops the thread
  CompletionQueue(const CompletionQueue&) = delete;
  CompletionQueue& operator=(const CompletionQueue&) = delete;

  void push(std::vector<sparcoll::Request> requests, std::string what, Done done);
  // Returns once every entry pushed before the call has completed.
  void drain();

 private:
  struct Entry {
    std::vector<sparcoll::Request> requests;
    std::string what;
    Done done;
  };
  void run();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Entry> entries_;
  std::uint64_t pushed_ = 0;
  std::uint64_t completed_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace sparcoll_torch
