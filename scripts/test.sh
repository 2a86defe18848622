#!/usr/bin/env bash
# Installs, builds and runs the whole test suite:
#   1. the dependency check: every system file the build used comes from a package that
#      scripts/install-deps.sh installs (scripts/check-deps);
#   2. on the host: unit, driver conformance (shm, tcp, dpdk), multi-process integration, the
#      python suite, and the 'features' suite that fails when a promised feature was not built;
#   3. a short coverage-guided fuzzing run of every parser of peer bytes (scripts/fuzz --smoke);
#   4. the host suites again, chosen ones, under ASan+UBSan and under TSan builds
#      (scripts/sanitize, docs/sanitizers.md);
#   5. inside a Soft-RoCE VM (scripts/rxe-vm): the rdma driver suites and block-sparse
#      allreduce over real verbs (they are reported skipped on the host, which has no RDMA).
#      SPARCOLL_SKIP_RDMA_VM="REASON" skips it (the reason is printed; the rdma tests stay skipped).
# Each step says what it does; a failing step prints its errors. Ends with one line
# "tests: N passed, M failed" over everything that ran, and exits non-zero if anything failed.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/steps.sh

echo "test: step 1/7: installing dependencies (scripts/install-deps.sh)"
scripts/install-deps.sh
echo "test: step 2/7: building (scripts/build.sh)"
scripts/build.sh
echo "test: step 3/7: checking that the install step provides everything the build used (scripts/check-deps)"
scripts/check-deps build

# Every GoogleTest binary writes its JSON report as gtest-*-report.json in its build directory;
# old ones go first, so the summary counts this run's only.
rm -f build/gtest-*-report.json build-asan/gtest-*-report.json build-tsan/gtest-*-report.json
status=0
run_live "test: step 4/7: host suites (meson test; about 5 minutes on 2 cores)" build/test-host.log \
  meson test -C build --print-errorlogs --no-rebuild || status=1
run_live "test: step 5/7: fuzzing every parser of peer bytes, 15 s each (scripts/fuzz --smoke; about 2 minutes)" \
  build/test-fuzz.log scripts/fuzz --smoke || status=1
run_live "test: step 6/7: host suites under sanitizers: ASan+UBSan, then TSan (scripts/sanitize; about 10 minutes)" \
  build/test-sanitize.log scripts/sanitize || status=1

if [ -n "${SPARCOLL_SKIP_RDMA_VM:-}" ] && [ "${SPARCOLL_SKIP_RDMA_VM}" != 0 ]; then
  echo "test: step 7/7: skipped: the rdma suites inside the Soft-RoCE VM (SPARCOLL_SKIP_RDMA_VM: $SPARCOLL_SKIP_RDMA_VM)"
else
  # One VM boot for the three binaries: auto's choice where rdma is usable, the driver suites
  # over rdma, then whole jobs over rdma.
  run_live "test: step 7/7: rdma suites inside the Soft-RoCE VM (scripts/rxe-vm)" build/test-rdma-vm.log \
    scripts/rxe-vm --timeout 1500 -- /bin/sh -c 'status=0
      for suite in unit driver integration; do
        build/tests/sparcoll-$suite-tests --gtest_filter="*/rdma:Rdma*:*Rdma*:*AutoTransport.*" \
          --gtest_output=json:build/gtest-rdma-$suite-report.json || status=1
      done
      exit $status' || status=1
fi
shopt -s nullglob
reports=(build/gtest-*-report.json build-asan/gtest-*-report.json build-tsan/gtest-*-report.json)
python3 scripts/summarize-gtest.py --meson-log build/meson-logs/testlog.json "${reports[@]}" || status=1
exit $status
