#!/usr/bin/env bash
# DPDK benchmarks on a memif pair (no NIC needed), in one run:
#   1. goodput: a raw DPDK burst sender/receiver (sparcoll-dpdk-raw-bw, two processes) against
#      the dpdk driver through the transport interface (sparcoll-transport-bw: two driver
#      instances, reliable delivery, acks and windows included), 8 KiB payloads;
#   2. block-sparse allreduce, 2 ranks, 16 MiB fp32, over dpdk (memif), shm and tcp at 1%, 10%, 100%;
#   3. the same over dpdk with 1% of the data frames dropped (SPARCOLL_DPDK_DROP_EVERY=100):
#      the slowdown recovery costs.
# Two cores: run it on a quiet machine (the script warns when the load average is above 1).
#   scripts/bench-dpdk.sh [BUILD_DIR]        (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
for tool in perf/sparcoll-dpdk-raw-bw perf/sparcoll-transport-bw perf/sparcoll-perf src/tools/sparcoll-run; do
  [ -x "$build/$tool" ] || { echo "bench-dpdk: $build/$tool is missing (build with DPDK installed)" >&2; exit 2; }
done
load=$(cut -d' ' -f1 /proc/loadavg)
awk -v l="$load" 'BEGIN { exit !(l > 1.0) }' && echo "# warning: load average $load: figures will be noisy"
echo "# commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(nproc) cores"

echo "# goodput, memif pair, 8192-byte payloads, 3 s"
socket=/sparcoll-bench-$$
"$build"/perf/sparcoll-dpdk-raw-bw --role server --socket $socket --json /dev/null >/tmp/bench-dpdk-raw.$$ 2>/dev/null &
server=$!
"$build"/perf/sparcoll-dpdk-raw-bw --role client --socket $socket --size 8192 --seconds 3 >/dev/null 2>&1 || true
wait $server || true
raw=$(sed -n 's/.*gbit_per_s=\([0-9.]*\).*/\1/p' /tmp/bench-dpdk-raw.$$ | head -1)
rm -f /tmp/bench-dpdk-raw.$$
printf "raw dpdk burst (receiver)     %8.2f Gbit/s\n" "${raw:-0}"
line=$("$build"/perf/sparcoll-transport-bw --driver dpdk --size 8192 --seconds 3)
drv=$(echo "$line" | awk '{print $10 * 8}')
printf "sparcoll dpdk driver           %8.2f Gbit/s  (%.2fx of raw)\n" "$drv" "$(awk -v a="$drv" -v b="${raw:-0}" 'BEGIN { print (b > 0 ? a / b : 0) }')"

perf() {  # perf TRANSPORT DENSITY [ENV...]
  local transport=$1 density=$2
  shift 2
  env "$@" "$build"/src/tools/sparcoll-run -n 2 --transport "$transport" --no-prefix -- "$build"/perf/sparcoll-perf \
    --elements 4194304 --density "$density" --iters 10 --warmup 2 --check $header --json "$build"/bench-dpdk.jsonl
  header=--no-header
}
echo "# block-sparse allreduce, 2 ranks, 4194304 x f32 (16 MiB), block 256"
header=""
for density in 0.01 0.1 1; do
  for transport in dpdk shm tcp; do perf $transport $density; done
done
echo "# dpdk with every 100th data frame dropped (1% loss, resent by the driver)"
for density in 0.01 0.1 1; do perf dpdk $density SPARCOLL_DPDK_DROP_EVERY=100; done
