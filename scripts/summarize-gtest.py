#!/usr/bin/env python3
"""Prints 'tests: N passed, M failed' (and the failed names) from a GoogleTest JSON report."""
import json
import sys

def main(path):
    try:
        with open(path) as f:
            report = json.load(f)
    except (OSError, ValueError) as e:
        print(f"summarize-gtest: cannot read {path}: {e}")
        return 1
    passed, failed, skipped = 0, [], 0
    for suite in report.get("testsuites", []):
        for case in suite.get("testsuite", []):
            name = f"{suite['name']}.{case['name']}"
            if case.get("failures"):
                failed.append(name)
            elif case.get("result") == "SKIPPED" or case.get("status") == "NOTRUN":
                skipped += 1
            else:
                passed += 1
    for name in failed:
        print(f"failed: {name}")
    line = f"tests: {passed} passed, {len(failed)} failed"
    if skipped:
        line += f", {skipped} skipped"
    print(line)
    return 1 if failed or passed == 0 else 0

if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "build/gtest-report.json"))
