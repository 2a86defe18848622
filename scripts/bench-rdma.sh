#!/usr/bin/env bash
# RDMA benchmarks on real verbs, inside the Soft-RoCE VM (scripts/rxe-vm), in one VM run:
#   1. raw write bandwidth at 64 KiB: perftest's ib_write_bw against sparcoll's rdma driver
#      (sparcoll-transport-bw, one-way goodput through the driver interface), tcp for reference;
#   2. block-sparse allreduce over rdma against the same over tcp, 2 ranks, 1% / 10% / 100%.
# Emulated CPU: compare ratios within one run, never absolute figures with other machines.
#   scripts/bench-rdma.sh [BUILD_DIR]         (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
if [ "${BENCH_RDMA_INSIDE_VM:-0}" != 1 ]; then
  exec scripts/rxe-vm --timeout 1200 -- env BENCH_RDMA_INSIDE_VM=1 "$0" "$build"
fi

echo "# raw one-way bandwidth, 64 KiB messages, rxe0"
ib_write_bw -d rxe0 -s 65536 -D 3 >/tmp/ibw-server.txt 2>&1 &
server=$!
sleep 1
ib_write_bw -d rxe0 -s 65536 -D 3 192.168.77.1 >/tmp/ibw-client.txt 2>&1 || true
wait $server || true
# perftest's result line: bytes, iterations, BW peak, BW average (MB/s), MsgRate.
awk '/^ *65536/ {printf "ib_write_bw      size 65536 MBps_avg %s\n", $4}' /tmp/ibw-client.txt
for driver in rdma tcp; do
  "$build"/perf/sparcoll-transport-bw --driver $driver --size 65536 --seconds 3 |
    awk -v d=$driver '{printf "sparcoll-%-7s size 65536 MBps_avg %.2f\n", d, $10 * 1000}'
done

echo "# block-sparse allreduce, 2 ranks, 4194304 x f32 (16 MiB), block 256"
first=""
for density in 0.01 0.1 1; do
  for transport in rdma tcp; do
    "$build"/src/tools/sparcoll-run -n 2 --transport $transport --no-prefix -- "$build"/perf/sparcoll-perf \
      --elements 4194304 --density $density --iters 5 --warmup 1 --check $first --json "$build"/bench-rdma.jsonl
    first=--no-header
  done
done

echo "# the same over rdma with the send buffer registered (zero-copy writes from it)"
for density in 0.01 0.1 1; do
  "$build"/src/tools/sparcoll-run -n 2 --transport rdma --no-prefix -- "$build"/perf/sparcoll-perf \
    --elements 4194304 --density $density --iters 5 --warmup 1 --check --register --no-header
done
