#include "completion_queue.hpp"

#include <stdexcept>

namespace sparcoll_torch {

CompletionQueue::CompletionQueue() : thread_([this] { run(); }) {}

CompletionQueue::~CompletionQueue() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void CompletionQueue::push(std::vector<sparcoll::Request> requests, std::string what, Done done) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.push_back(Entry{std::move(requests), std::move(what), std::move(done)});
    ++pushed_;
  }
  changed_.notify_all();
}

void CompletionQueue::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  const std::uint64_t target = pushed_;
  changed_.wait(lock, [&] { return completed_ >= target; });
}

void CompletionQueue::run() {
  for (;;) {
    Entry entry;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] { return stopping_ || !entries_.empty(); });
      // Stop only when empty: a queued request still points into tensors its Work keeps alive.
      if (entries_.empty()) return;
      entry = std::move(entries_.front());
      entries_.pop_front();
    }
    std::exception_ptr error;
    for (sparcoll::Request& request : entry.requests) {
      try {
        request.wait();  // every request, even after a failure: buffers stay in use until done
      } catch (const sparcoll::Error& e) {
        std::string message = entry.what + e.what();
        // A rank whose input failed the backend's checks joins the collective with a null
        // buffer (ProcessGroupSparcoll::abort_peers) and sparcoll relays that rank's argument
        // error here ("rank N aborted op K: ...sendbuf is null with count 1" on the block-sparse
        // path, "rank N failed it: ...buffer is null with count 1" on the collective thread).
        // The torch tensors passed the checks, so a null buffer can only be that abort.
        if (message.find("is null with count 1") != std::string::npos)
          message += " (that rank's input failed the backend's checks; its own error names the problem)";
        if (!error) error = std::make_exception_ptr(std::runtime_error(message));
      } catch (const std::exception& e) {
        if (!error) error = std::make_exception_ptr(std::runtime_error(entry.what + e.what()));
      }
    }
    try {
      if (entry.done) entry.done(error);
    } catch (...) {
      // A completion that throws must not take the thread (and every later Work) down with it;
      // the Work was given the error already or finishes through its own catch.
    }
    // Release the entry before counting it: once drain() returns, this thread must hold nothing
    // of the group's. A Request keeps its communicator alive (so the group's shutdown would not
    // really leave the job), and the Work's tensors need the GIL to die, which a thread joining
    // this one may hold.
    entry = Entry{};
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++completed_;
    }
    changed_.notify_all();
  }
}

}  // namespace sparcoll_torch
