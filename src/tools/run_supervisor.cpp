#include "tools/run_supervisor.hpp"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace sparcoll::run {
namespace {

constexpr std::size_t kReadChunk = 64 * 1024;
// A drain stops after this many chunks even if something outside the child's process group
// keeps writing into the pipe; 1 MiB is the largest pipe buffer an unprivileged child can set.
constexpr int kMaxDrainChunks = 16;

void report(const std::string& message) { write_fully(STDERR_FILENO, "sparcoll-run: " + message + "\n"); }

std::string format_seconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", seconds);
  return text;
}

}  // namespace

Supervisor::Supervisor(LauncherSignals* signals, SupervisorLimits limits, bool prefix)
    : signals_(signals), limits_(limits), prefix_(prefix) {
  if (limits_.timeout_s > 0)
    job_deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(limits_.timeout_s));
}

void Supervisor::add(const ChildIdentity& who, const SpawnedChild& child) {
  by_pid_[child.pid] = children_.size();
  children_.emplace_back(who, child, prefix_ ? who.prefix() : std::string());
}

void Supervisor::fail(const std::string& message, int exit_code) {
  if (terminating_) return;
  report(message);
  exit_code_ = exit_code;
  begin_termination();
}

int Supervisor::run() {
  std::vector<pollfd> fds;
  std::vector<Stream*> polled;
  while (any_running()) {
    fds.clear();
    polled.clear();
    fds.push_back({signals_->fd(), POLLIN, 0});
    for (Child& child : children_) {
      for (Stream& stream : child.streams) {
        if (stream.fd < 0) continue;
        fds.push_back({stream.fd, POLLIN, 0});
        polled.push_back(&stream);
      }
    }
    int timeout_ms = -1;
    if (auto deadline = next_deadline()) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline - Clock::now()).count();
      timeout_ms = static_cast<int>(std::max<decltype(left)>(left, 0));
    }
    int ready = poll(fds.data(), fds.size(), timeout_ms);
    if (ready < 0 && errno != EINTR) {
      report(std::string("poll: ") + std::strerror(errno) + "; killing every process");
      signal_running(SIGKILL);
      if (!exit_code_) exit_code_ = 1;
      break;
    }
    for (std::size_t i = 1; ready > 0 && i < fds.size(); ++i)
      if (fds[i].revents != 0) read_stream(polled[i - 1]);
    // After the output, so a child's last lines come before the launcher's message about it.
    if (ready > 0 && fds[0].revents != 0) on_signals();
    check_deadlines();
  }
  // Reaps stragglers after a poll failure; a no-op otherwise.
  while (waitpid(-1, nullptr, 0) > 0) {
  }
  for (Child& child : children_) drain_streams(&child);
  return exit_code_.value_or(0);
}

void Supervisor::read_stream(Stream* stream) {
  char buffer[kReadChunk];
  ssize_t n = read(stream->fd, buffer, sizeof buffer);
  if (n > 0) {
    stream->forwarder.forward(std::string_view(buffer, static_cast<std::size_t>(n)));
  } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
    stream->forwarder.flush();
    close(stream->fd);
    stream->fd = -1;
  }
}

void Supervisor::drain_streams(Child* child) {
  for (Stream& stream : child->streams) {
    for (int chunk = 0; chunk < kMaxDrainChunks && stream.fd >= 0; ++chunk) {
      char buffer[kReadChunk];
      ssize_t n = read(stream.fd, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      stream.forwarder.forward(std::string_view(buffer, static_cast<std::size_t>(n)));
    }
    stream.forwarder.flush();
    if (stream.fd >= 0) close(stream.fd);
    stream.fd = -1;
  }
}

void Supervisor::on_signals() {
  for (int sig : signals_->read_pending()) {
    if (sig == SIGCHLD) continue;  // reaped below, whatever the number of SIGCHLDs coalesced
    if (forwarded_signal_) {
      report("got " + signal_name(sig) + " again; killing every process");
      signal_running(SIGKILL);
      continue;
    }
    forwarded_signal_ = true;
    report("got " + signal_name(sig) + "; forwarding it to every process");
    if (!exit_code_) exit_code_ = 128 + sig;
    terminating_ = true;
    signal_running(sig);
    // The same grace as after a failure; a second signal does not wait for it.
    if (!kill_deadline_) kill_deadline_ = Clock::now() + limits_.kill_grace;
  }
  int status = 0;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    auto it = by_pid_.find(pid);
    if (it != by_pid_.end()) on_exit(&children_[it->second], status);
  }
}

void Supervisor::on_exit(Child* child, int wait_status) {
  child->running = false;
  // Whatever the child left behind in its process group goes with it; right after the reap the
  // group id cannot have been reused yet.
  kill(-child->pid, SIGKILL);
  drain_streams(child);
  bool failed = !WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0;
  if (failed && !terminating_) {
    if (WIFSIGNALED(wait_status)) {
      int sig = WTERMSIG(wait_status);
      fail(child->who.name() + " killed by signal " + std::to_string(sig) + " (" + signal_name(sig) + ")" +
               (WCOREDUMP(wait_status) ? ", core dumped" : ""),
           128 + sig);
    } else {
      int code = WEXITSTATUS(wait_status);
      fail(child->who.name() + " exited with code " + std::to_string(code), code);
    }
    return;
  }
  // All ranks done and well: aggregators are expected to notice and leave on their own.
  if (!terminating_ && !child->who.is_aggregator() && !ranks_running() && any_running())
    linger_deadline_ = Clock::now() + limits_.aggregator_linger;
}

void Supervisor::check_deadlines() {
  Clock::time_point now = Clock::now();
  if (kill_deadline_ && now >= *kill_deadline_) {
    kill_deadline_.reset();
    signal_running(SIGKILL);
  }
  if (terminating_) return;
  if (job_deadline_ && now >= *job_deadline_) {
    fail("timed out after " + format_seconds(limits_.timeout_s) + " s; still running: " + running_names(false), 124);
  } else if (linger_deadline_ && now >= *linger_deadline_) {
    fail("all ranks exited 0 but these are still running " +
             format_seconds(std::chrono::duration<double>(limits_.aggregator_linger).count()) +
             " s later: " + running_names(true) + "; killing them",
         1);
  }
}

void Supervisor::begin_termination() {
  terminating_ = true;
  signal_running(SIGTERM);
  kill_deadline_ = Clock::now() + limits_.kill_grace;
}

void Supervisor::signal_running(int sig) {
  // To the whole process group: a shell wrapper's own children must hear it too.
  for (const Child& child : children_)
    if (child.running) kill(-child.pid, sig);
}

std::optional<Supervisor::Clock::time_point> Supervisor::next_deadline() const {
  std::optional<Clock::time_point> next = kill_deadline_;
  if (!terminating_) {
    for (const auto& deadline : {job_deadline_, linger_deadline_})
      if (deadline && (!next || *deadline < *next)) next = deadline;
  }
  return next;
}

std::string Supervisor::running_names(bool aggregators_only) const {
  std::string names;
  for (const Child& child : children_) {
    if (!child.running || (aggregators_only && !child.who.is_aggregator())) continue;
    if (!names.empty()) names += ", ";
    names += child.who.name();
  }
  return names;
}

bool Supervisor::ranks_running() const {
  for (const Child& child : children_)
    if (child.running && !child.who.is_aggregator()) return true;
  return false;
}

bool Supervisor::any_running() const {
  for (const Child& child : children_)
    if (child.running) return true;
  return false;
}

}  // namespace sparcoll::run
