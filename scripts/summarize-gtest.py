#!/usr/bin/env python3
"""Prints 'tests: N passed, M failed' (and the failed names) from GoogleTest JSON reports.

Several reports (the host run and the Soft-RoCE VM run) are merged by test name: a test that
failed anywhere failed; one that was skipped on the host but ran in the VM counts as run there.
"""
import json
import sys

RANK = {"skipped": 0, "passed": 1, "failed": 2}


def outcomes(path):
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


def main(paths):
    merged = {}
    for path in paths:
        try:
            for name, outcome in outcomes(path):
                if RANK[outcome] >= RANK[merged.get(name, "skipped")]:
                    merged[name] = outcome
        except (OSError, ValueError) as e:
            print(f"summarize-gtest: cannot read {path}: {e}")
            return 1
    failed = sorted(n for n, o in merged.items() if o == "failed")
    passed = sum(1 for o in merged.values() if o == "passed")
    skipped = sum(1 for o in merged.values() if o == "skipped")
    for name in failed:
        print(f"failed: {name}")
    for name in sorted(n for n, o in merged.items() if o == "skipped"):
        print(f"skipped: {name}")
    line = f"tests: {passed} passed, {len(failed)} failed"
    if skipped:
        line += f", {skipped} skipped"
    print(line)
    return 1 if failed or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["build/gtest-report.json"]))
