#!/usr/bin/env bash
# The main job: installs, builds, then runs a 4-rank block-sparse allreduce of 100 MiB of fp32 at
# 1% density on the default transport, checks every element against a reference and prints the
# result row (nccl-tests columns; #wrong must be 0). Each step says what it does; a failing step
# prints its error lines and the demo exits non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "demo: step 1/3: installing dependencies (scripts/install-deps.sh)"
scripts/install-deps.sh
echo "demo: step 2/3: building (scripts/build.sh)"
scripts/build.sh
echo "demo: step 3/3: running a 4-rank block-sparse allreduce of 100 MiB fp32 at 1% density, checked"
exec build/src/tools/sparcoll-run -n 4 -- build/perf/sparcoll-perf \
  --elements 26214400 --dtype f32 --density 0.01 --iters 10 --warmup 2 --check "$@"
