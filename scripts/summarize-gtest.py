#!/usr/bin/env python3
"""Prints 'tests: N passed, M failed' over every test the README test command ran.

    summarize-gtest.py [--meson-log build/meson-logs/testlog.json] REPORT.json...

Counted: every GoogleTest case of the JSON reports, and every Meson test that is not a
GoogleTest binary (the python suite, the 'features' suite) from Meson's test log. Several
GoogleTest reports (the host run and the Soft-RoCE VM run) are merged by test name: a test that
failed anywhere failed; one that was skipped on the host but ran in the VM counts as run there.

A Meson test that was skipped is a suite the README promises that did not run (a feature not
built because a package is absent, the python suite without torch): it fails the run, with the
reason the test printed. So does a GoogleTest binary that crashed before writing its report.
"""
import argparse
import json
import sys

RANK = {"skipped": 0, "passed": 1, "failed": 2}


def gtest_outcomes(path):
    with open(path) as f:
        report = json.load(f)
    for suite in report.get("testsuites", []):
        for case in suite.get("testsuite", []):
            name = f"{suite['name']}.{case['name']}"
            if case.get("failures"):
                yield name, "failed"
            elif case.get("result") == "SKIPPED" or case.get("status") == "NOTRUN":
                yield name, "skipped"
            else:
                yield name, "passed"


def meson_outcomes(path):
    """(name, outcome, first output line, is a GoogleTest binary) of each Meson test."""
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            t = json.loads(line)
            is_gtest = any("--gtest_output" in a for a in t.get("command", []))
            result = t.get("result", "")
            outcome = {"OK": "passed", "SKIP": "skipped", "EXPECTEDFAIL": "passed"}.get(result, "failed")
            said = (t.get("stdout") or "").strip().splitlines()
            yield t["name"], outcome, (said[-1] if said else result), is_gtest, result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--meson-log", help="Meson's testlog.json")
    ap.add_argument("reports", nargs="*", default=["build/gtest-unit-report.json"])
    args = ap.parse_args()

    merged = {}
    problems = []
    for path in args.reports:
        try:
            for name, outcome in gtest_outcomes(path):
                if RANK[outcome] >= RANK[merged.get(name, "skipped")]:
                    merged[name] = outcome
        except (OSError, ValueError) as e:
            problems.append(f"cannot read the GoogleTest report {path}: {e}")

    not_run = []
    if args.meson_log:
        try:
            for name, outcome, said, is_gtest, result in meson_outcomes(args.meson_log):
                if is_gtest:
                    # Its cases are counted from its report; a crash or timeout of the binary
                    # itself fails the run even when the report it left looks clean.
                    if result not in ("OK", "FAIL"):
                        problems.append(f"the GoogleTest binary of '{name}' ended with {result}")
                    continue
                merged[name] = outcome
                if outcome == "skipped":
                    not_run.append(f"{name}: {said}")
        except (OSError, ValueError) as e:
            problems.append(f"cannot read Meson's test log {args.meson_log}: {e}")

    failed = sorted(n for n, o in merged.items() if o == "failed")
    passed = sum(1 for o in merged.values() if o == "passed")
    skipped = sorted(n for n, o in merged.items() if o == "skipped")
    for name in failed:
        print(f"failed: {name}")
    for name in skipped:
        print(f"skipped: {name}")
    for line in not_run:
        print(f"not run (a suite the README promises): {line}")
    for line in problems:
        print(f"error: {line}")
    line = f"tests: {passed} passed, {len(failed)} failed"
    if skipped:
        line += f", {len(skipped)} skipped"
    print(line)
    return 1 if failed or not_run or problems or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
