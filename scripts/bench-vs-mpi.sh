#!/usr/bin/env bash
# Block-sparse allreduce against Open MPI's MPI_Allreduce on the same data, same ranks, same run:
# 100 MiB of fp32 (26214400 elements), block 256, densities 0.1% .. 100%. Prints the result
# rows (nccl-tests columns, with sparcoll's speed-up over MPI) and appends them as JSON lines to
# build/bench-vs-mpi.jsonl. Every point is checked (#wrong must be 0). scripts/bench-all runs the
# whole comparison (Gloo too, more sizes, both rank counts).
#   scripts/bench-vs-mpi.sh [RANKS] [TRANSPORT]      (defaults: 2 shm)
set -euo pipefail
cd "$(dirname "$0")/.."
ranks=${1:-2}
transport=${2:-shm}
elements=26214400
iters=${ITERS:-10}
out=build/bench-vs-mpi.jsonl
rm -f "$out"
mpi_btl="self,vader"
[ "$transport" = tcp ] && mpi_btl="self,tcp --mca btl_tcp_if_include lo"
oversubscribe=""
[ "$ranks" -gt "$(nproc)" ] && oversubscribe="--oversubscribe"
first=1
for density in 0 0.001 0.01 0.1 1; do
  header=--no-header
  [ $first = 1 ] && header="" && first=0
  # shellcheck disable=SC2086
  mpirun --allow-run-as-root $oversubscribe -np "$ranks" --mca btl $mpi_btl build/perf/sparcoll-perf-mpi \
    --transport "$transport" --elements $elements --density "$density" --iters "$iters" --warmup 2 --json "$out" $header
  # After the peer, so that its row gives sparcoll's speed-up column (--baseline).
  build/src/tools/sparcoll-run -n "$ranks" --transport "$transport" --no-prefix -- build/perf/sparcoll-perf \
    --elements $elements --density "$density" --iters "$iters" --warmup 2 --json "$out" --baseline "$out" --no-header
done
