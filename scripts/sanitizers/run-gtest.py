#!/usr/bin/python3
"""Runs a GoogleTest binary of a sanitizer build and writes a report no sanitizer finding escapes.

    run-gtest.py --label asan/unit --log LOG --report REPORT.json [--timeout S] -- BINARY ARGS...

With halt_on_error=1 a sanitizer report ends the process at once, so GoogleTest writes no JSON
report and the tests after the faulty one never run. This runner reads the binary's output as it
comes: the test running when a report (or a crash) happens is failed with the report's first
lines, and the binary is started again on the tests not yet run (at most --restarts times). A
report printed while a test passes (a forked child's, on the shared stderr) fails that test too,
and so does a report after the last test (LeakSanitizer's, at exit) or an unclean exit: the
synthetic test SanitizerExit.<label> says whether the binary ended cleanly.

REPORT is in GoogleTest's JSON shape, for scripts/summarize-gtest.py, which merges it with the
plain build's reports by test name (a test failing in any report fails). The whole output goes
to LOG; the terminal gets one line per run, each failure with its first lines, and a summary.
Exits 1 if anything failed.
"""
import argparse
import errno
import json
import os
import pty
import re
import signal
import subprocess
import sys
import tempfile
import termios
import time

# First lines of a report, per sanitizer (tests/integration/sanitizer_report.hpp has the same).
MARKERS = ("runtime error: ", "ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "WARNING: ThreadSanitizer",
           "ERROR: ThreadSanitizer", "ERROR: UndefinedBehaviorSanitizer")
REPORT_LINES = 24  # of a sanitizer report, kept with the failure and printed
STATUS = re.compile(r"^\[ +(RUN|OK|FAILED|SKIPPED) +\] (\S+)")


def has_marker(line):
    return any(m in line for m in MARKERS)


class Run:
    """One start of the binary: what its output said, test by test."""

    def __init__(self):
        self.outcome = {}     # test name -> passed | failed | skipped (from the status lines)
        self.reports = {}     # test name (or None: outside any test) -> first lines of a report
        self.current = None   # the test running, if any
        self.capturing = None  # [test, lines] while a report's lines are collected

    def feed(self, line):
        m = STATUS.match(line)
        if m:
            kind, name = m.groups()
            name = name.rstrip(",")  # "[  FAILED  ] Suite.Test/0, where GetParam() = ..."
            if kind == "RUN":
                self.current = name
            elif self.current == name:
                self.outcome[name] = {"OK": "passed", "FAILED": "failed", "SKIPPED": "skipped"}[kind]
                self.current = None
        if self.capturing is not None:
            self.capturing[1].append(line)
            if len(self.capturing[1]) >= REPORT_LINES:
                self.capturing = None
        elif has_marker(line) and self.current not in self.reports:
            self.capturing = [self.current, [line]]
            self.reports[self.current] = self.capturing[1]


def run_once(cmd, log, timeout, env):
    """Runs cmd with its output in log; returns (Run, exit status, timed out).

    The binary writes to a pseudo-terminal, not a pipe: its stdout is then line-buffered like its
    unbuffered stderr, so a sanitizer report (stderr) comes after the "[ RUN ]" line of the test
    it happened in. Through a pipe GoogleTest's lines lag in stdio's buffer and a report would be
    put on an earlier test."""
    run = Run()
    start = time.monotonic()
    master, slave = pty.openpty()
    attrs = termios.tcgetattr(slave)
    attrs[1] &= ~termios.ONLCR  # "\n" stays "\n"
    termios.tcsetattr(slave, termios.TCSANOW, attrs)
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=env,
                            start_new_session=True)
    os.close(slave)
    timed_out = False

    def on_alarm(*_):
        nonlocal timed_out
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)

    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(max(1, int(timeout)))
    pending = b""
    try:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError as e:  # EIO: every holder of the terminal (ranks too) has closed it
                if e.errno == errno.EIO:
                    break
                raise
            if not chunk:
                break
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for raw in lines:
                line = raw.decode(errors="replace")
                log.write(line + "\n")
                run.feed(line)
            log.flush()  # the log shows where a slow or stuck binary is
        if pending:
            line = pending.decode(errors="replace")
            log.write(line + "\n")
            run.feed(line)
    finally:
        signal.alarm(0)
        os.close(master)
    status = proc.wait()
    log.write(f"run-gtest: exit status {status} after {time.monotonic() - start:.0f} s\n")
    log.flush()
    return run, status, timed_out


def gtest_cases(path):
    """(name, outcome, failure text) of every case in a GoogleTest JSON report."""
    with open(path) as f:
        report = json.load(f)
    for suite in report.get("testsuites", []):
        for case in suite.get("testsuite", []):
            name = f"{suite['name']}.{case['name']}"
            if case.get("failures"):
                yield name, "failed", "\n".join(x.get("failure", "") for x in case["failures"])
            elif case.get("result") == "SKIPPED" or case.get("status") == "NOTRUN":
                yield name, "skipped", ""
            else:
                yield name, "passed", ""


def with_exclusions(gtest_filter, names):
    """gtest_filter with `names` added to its negative patterns."""
    if not names:
        return gtest_filter
    extra = ":".join(sorted(names))
    if "-" in gtest_filter:
        return f"{gtest_filter}:{extra}"
    return f"{gtest_filter or '*'}-{extra}"


def write_report(path, results):
    """results: name -> (outcome, failure text); written in GoogleTest's JSON shape."""
    suites = {}
    for name, (outcome, text) in sorted(results.items()):
        suite, _, case = name.partition(".")
        entry = {"name": case, "status": "RUN", "result": "SKIPPED" if outcome == "skipped" else "COMPLETED"}
        if outcome == "failed":
            entry["failures"] = [{"failure": text or "failed", "type": ""}]
        suites.setdefault(suite, []).append(entry)
    report = {"name": "AllTests", "tests": len(results),
              "testsuites": [{"name": s, "tests": len(c), "testsuite": c} for s, c in suites.items()]}
    with open(path, "w") as f:
        json.dump(report, f, indent=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--label", required=True, help="names this run in messages, e.g. asan/unit")
    ap.add_argument("--log", required=True)
    ap.add_argument("--report", required=True)
    ap.add_argument("--timeout", type=float, default=1200, help="seconds for each start of the binary")
    ap.add_argument("--restarts", type=int, default=8, help="starts after a crash, at most")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    gtest_filter = "*"
    rest = []
    for a in command[1:]:
        if a.startswith("--gtest_filter="):
            gtest_filter = a[len("--gtest_filter="):]
        else:
            rest.append(a)

    results = {}   # name -> (outcome, failure text)
    exit_problems = []
    started = time.monotonic()
    with open(args.log, "w") as log, tempfile.TemporaryDirectory() as tmp:
        done = set()
        for attempt in range(args.restarts + 1):
            json_path = os.path.join(tmp, f"run{attempt}.json")
            cmd = [command[0], *rest, "--gtest_color=no", f"--gtest_filter={with_exclusions(gtest_filter, done)}",
                   f"--gtest_output=json:{json_path}"]
            log.write(f"run-gtest: {' '.join(cmd)}\n")
            log.flush()
            run, status, timed_out = run_once(cmd, log, args.timeout, os.environ.copy())
            if os.path.exists(json_path):
                for name, outcome, text in gtest_cases(json_path):
                    results[name] = (outcome, text)
            else:
                for name, outcome in run.outcome.items():
                    results[name] = (outcome, "")
            for name, lines in run.reports.items():
                if name is not None:
                    results[name] = ("failed", "sanitizer report:\n" + "\n".join(lines))
            crashed = not os.path.exists(json_path)
            if crashed:
                why = "timed out" if timed_out else (f"killed by signal {-status}" if status < 0 else f"exit status {status}")
                victim = run.current
                if victim is not None:
                    lines = run.reports.get(victim)
                    text = f"the binary died in this test ({why})"
                    results[victim] = ("failed", text + (":\n" + "\n".join(lines) if lines else ""))
                    done.add(victim)
                else:
                    exit_problems.append(f"the binary died outside any test ({why})")
                done.update(run.outcome)
                if victim is None or attempt == args.restarts:
                    if victim is not None:
                        exit_problems.append(f"stopped after {args.restarts} restarts; the tests not yet run did not run")
                    break
                continue
            if None in run.reports:
                exit_problems.append("a sanitizer report outside any test (at exit: LeakSanitizer?):\n" +
                                     "\n".join(run.reports[None]))
            elif status != 0 and not any(o == "failed" for o, _ in results.values()):
                exit_problems.append(f"exit status {status} with every test passed")
            break

    exit_name = f"SanitizerExit.{args.label}"
    results[exit_name] = ("failed", "\n".join(exit_problems)) if exit_problems else ("passed", "")
    write_report(args.report, results)

    failed = {n: t for n, (o, t) in results.items() if o == "failed"}
    passed = sum(1 for n, (o, _) in results.items() if o == "passed" and n != exit_name)
    for name, text in sorted(failed.items()):
        print(f"sanitize: {args.label}: failed: {name}")
        for line in text.splitlines()[:REPORT_LINES]:
            print(f"  | {line[:300]}")
    print(f"sanitize: {args.label}: {passed} passed, {len(failed)} failed "
          f"({time.monotonic() - started:.0f} s; output in {args.log})")
    return 1 if failed or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
