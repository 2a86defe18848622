#!/usr/bin/env bash
# Installs, builds and runs the whole test suite (unit, driver conformance, multi-process
# integration). Ends with one line "tests: N passed, M failed".
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh >/dev/null
rm -f build/gtest-report.json
status=0
meson test -C build --print-errorlogs --no-rebuild || status=$?
python3 scripts/summarize-gtest.py build/gtest-report.json || status=1
exit $status
