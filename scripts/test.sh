#!/usr/bin/env bash
# Installs, builds and runs the whole test suite:
#   1. on the host: unit, driver conformance (shm, tcp), multi-process integration;
#   2. inside a Soft-RoCE VM (scripts/rxe-vm): the rdma driver suites and block-sparse
#      allreduce over real verbs (they are reported skipped on the host, which has no RDMA).
# Ends with one line "tests: N passed, M failed" over both runs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh >/dev/null
rm -f build/gtest-report.json build/gtest-algo-report.json build/gtest-rdma-report.json
status=0
meson test -C build --print-errorlogs --no-rebuild || status=$?

reports=(build/gtest-report.json build/gtest-algo-report.json)
if [ "${SPARCOLL_SKIP_RDMA_VM:-0}" = 1 ]; then
  echo "test: SPARCOLL_SKIP_RDMA_VM=1, the rdma suites stay skipped"
else
  echo "test: rdma suites inside the Soft-RoCE VM (scripts/rxe-vm)"
  scripts/rxe-vm --timeout 1500 -- build/tests/sparcoll-unit-tests \
    --gtest_filter='*/rdma:Rdma*:*Rdma*' --gtest_output=json:build/gtest-rdma-report.json || status=$?
  reports+=(build/gtest-rdma-report.json)
fi
python3 scripts/summarize-gtest.py "${reports[@]}" || status=1
exit $status
