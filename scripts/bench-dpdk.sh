#!/usr/bin/env bash
# DPDK benchmarks on a memif pair (no NIC needed), in one run:
#   1. goodput: a raw DPDK burst sender/receiver (sparcoll-dpdk-raw-bw) against the dpdk driver
#      through the transport interface (sparcoll-transport-bw: reliable delivery, acks and
#      windows included), back to back, --repeat times (default 3), with the load average of
#      each round and the median ratios. Same frame and link for both: a driver message of
#      SIZE bytes (default 8192) is a frame of SIZE + 104 bytes, so the raw tool sends UDP
#      payloads of SIZE + 62; both use memif bsize = frame rounded up to 128 and rsize 10 (1024
#      buffers), what the driver configures. The receiver is the memif client and runs memif
#      zero-copy, the sender the server, as in the driver's link between rank 1 and rank 0
#      (SPARCOLL_DPDK_MEMIF_ZERO_COPY=auto). Layouts:
#        raw     two processes, receiver pinned to CPU 0, sender to CPU 1;
#        raw-cp  raw with the sender copying each payload from a buffer of its own into the mbuf
#                (--copy): the work a send() that copies adds, without any protocol;
#        drv-2p  the driver in the same layout (sparcoll-transport-bw --processes 2 --pin);
#        drv-1p  both driver ends as two unpinned threads of one process (the old default);
#        drv-zc  drv-2p with zero-copy sends (sparcoll-transport-bw --register: the sender
#                rotates over 4 registered buffers, 32 MiB each, and waits for
#                user_memory_released() before reusing one; memif still copies once, like raw);
#        drv-zh  drv-zc from one unchanging registered buffer (--register --hot): a source in
#                cache, like the copy rows' single buffer and the raw tool's recycled mbufs;
#        raw-r   raw the other way: the sender is the zero-copy client, the receiver the server;
#        drv-r   drv-2p the other way (--sender-rank 1: rank 1, the zero-copy client, sends);
#        drv-nz  drv-2p with memif zero-copy off (SPARCOLL_DPDK_MEMIF_ZERO_COPY=off): a plain
#                memif pair, each side copying once per frame.
#   2. block-sparse allreduce, 2 ranks, 16 MiB fp32, over dpdk (memif), shm and tcp at 1%, 10%, 100%;
#   3. the same over dpdk with 1% of the data frames dropped (SPARCOLL_DPDK_DROP_EVERY=100):
#      the slowdown recovery costs.
# Two cores: run it on a quiet machine (the script warns when the load average is above 1);
# on a shared machine compare the ratios, not the absolute rates.
#   scripts/bench-dpdk.sh [--goodput-only] [--repeat N] [--size BYTES] [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
goodput_only=0 repeat=3 size=8192
while [ $# -gt 0 ]; do
  case $1 in
    --goodput-only) goodput_only=1; shift ;;
    --repeat) repeat=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    -*) echo "bench-dpdk: unknown flag $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
build=${1:-build}
tools="perf/sparcoll-dpdk-raw-bw perf/sparcoll-transport-bw"
[ "$goodput_only" = 1 ] || tools="$tools perf/sparcoll-perf src/tools/sparcoll-run"
for tool in $tools; do
  [ -x "$build/$tool" ] || { echo "bench-dpdk: $build/$tool is missing (build with DPDK installed)" >&2; exit 2; }
done
load=$(cut -d' ' -f1 /proc/loadavg)
awk -v l="$load" 'BEGIN { exit !(l > 1.0) }' && echo "# warning: load average $load: figures will be noisy"
echo "# commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(nproc) cores"

frame=$((size + 104)); bsize=$(( (frame + 127) / 128 * 128 )); rsize=10
echo "# goodput, memif pair, $size-byte messages ($frame-byte frames, raw UDP payload $((frame - 42))), bsize=$bsize rsize=$rsize, 3 s each, Gbit/s of payload"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Steal: the share of CPU time the hypervisor gave to other guests during the round (from
# /proc/stat); on a shared host it, more than the load average, is what makes rounds differ.
cpu_times() { awk '/^cpu / { print $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9, $9 }' /proc/stat; }
printf "%-5s %-16s %6s %8s %8s %8s %8s %8s %8s %8s %8s %8s %8s %8s %8s %8s %8s %8s %8s %8s\n" round load steal raw raw-cp raw-r \
  drv-2p drv-1p drv-zc drv-zh drv-r drv-nz ratio-2p ratio-1p ratio-zc ratio-zh 2p/rawcp r/raw-r nz/raw
# Gbit/s of one raw run (sparcoll-dpdk-raw-bw receiver + sender) on a fresh memif pair.
# DIR fwd: the sender is the memif server, the receiver the zero-copy client (the driver's rank 0
# sending to rank 1); rev: the sender is the zero-copy client (rank 1 sending to rank 0).
raw_goodput() {  # raw_goodput NAME fwd|rev [SENDER FLAGS...]
  local memif="bsize=$bsize,rsize=$rsize,socket=/sparcoll-bench-$$-$1" dir=$2 pid
  shift 2
  local server="--single-file-segments --vdev=net_memif0,role=server,$memif"
  local client="--single-file-segments --vdev=net_memif0,role=client,zero-copy=yes,$memif"
  # The memif server first: a client needs its server listening.
  if [ "$dir" = fwd ]; then
    "$build"/perf/sparcoll-dpdk-raw-bw --role client --eal "$server" --size $((frame - 42)) --seconds 3 "$@" \
      >/dev/null 2>&1 &
    pid=$!
    sleep 0.3
    "$build"/perf/sparcoll-dpdk-raw-bw --role server --eal "$client" >"$tmp/raw" 2>/dev/null || true
  else
    "$build"/perf/sparcoll-dpdk-raw-bw --role server --eal "$server" >"$tmp/raw" 2>/dev/null &
    pid=$!
    sleep 0.3
    "$build"/perf/sparcoll-dpdk-raw-bw --role client --eal "$client" --size $((frame - 42)) --seconds 3 "$@" \
      >/dev/null 2>&1 || true
  fi
  wait $pid || true
  sed -n 's/.*gbit_per_s=\([0-9.]*\).*/\1/p' "$tmp/raw" | head -1
}
for round in $(seq 1 "$repeat"); do
  l=$(cut -d' ' -f1-3 /proc/loadavg | tr ' ' '/')
  read -r total0 steal0 < <(cpu_times)
  raw=$(raw_goodput "raw-$round" fwd)
  rawcp=$(raw_goodput "cp-$round" fwd --copy)
  rawr=$(raw_goodput "rev-$round" rev)
  d2=$("$build"/perf/sparcoll-transport-bw --driver dpdk --size "$size" --seconds 3 --processes 2 --pin 2>"$tmp/d2" | awk '{print $10 * 8}')
  d1=$("$build"/perf/sparcoll-transport-bw --driver dpdk --size "$size" --seconds 3 2>"$tmp/d1" | awk '{print $10 * 8}')
  dz=$("$build"/perf/sparcoll-transport-bw --driver dpdk --size "$size" --seconds 3 --processes 2 --pin --register \
    2>"$tmp/dz" | awk '{print $10 * 8}')
  dh=$("$build"/perf/sparcoll-transport-bw --driver dpdk --size "$size" --seconds 3 --processes 2 --pin --register --hot \
    2>"$tmp/dh" | awk '{print $10 * 8}')
  dr=$("$build"/perf/sparcoll-transport-bw --driver dpdk --size "$size" --seconds 3 --processes 2 --pin --sender-rank 1 \
    2>/dev/null | awk '{print $10 * 8}')
  dn=$(SPARCOLL_DPDK_MEMIF_ZERO_COPY=off "$build"/perf/sparcoll-transport-bw --driver dpdk --size "$size" --seconds 3 \
    --processes 2 --pin 2>/dev/null | awk '{print $10 * 8}')
  read -r total1 steal1 < <(cpu_times)
  st=$(awk -v t=$((total1 - total0)) -v s=$((steal1 - steal0)) 'BEGIN { printf "%.0f%%", (t > 0 ? 100 * s / t : 0) }')
  awk -v r="$round" -v l="$l" -v st="$st" -v a="${raw:-0}" -v p="${rawcp:-0}" -v b="${d2:-0}" -v c="${d1:-0}" -v z="${dz:-0}" \
    -v h="${dh:-0}" -v n="${dn:-0}" -v ar="${rawr:-0}" -v dr="${dr:-0}" \
    'BEGIN { printf "%-5s %-16s %6s %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %7.2fx %7.2fx %7.2fx %7.2fx %7.2fx %7.2fx %7.2fx\n",
             r, l, st, a, p, ar, b, c, z, h, dr, n, (a > 0 ? b / a : 0), (a > 0 ? c / a : 0), (a > 0 ? z / a : 0),
             (a > 0 ? h / a : 0), (p > 0 ? b / p : 0), (ar > 0 ? dr / ar : 0), (a > 0 ? n / a : 0) }' |
    tee -a "$tmp/rows"
  grep -h "retransmitted" "$tmp/d2" | sed 's/^#/#   drv-2p/' || true
  grep -h "retransmitted" "$tmp/dz" | sed 's/^#/#   drv-zc/' || true
done
median() {  # median COLUMN LABEL
  sort -k"$1" -n "$tmp/rows" | awk -v n="$repeat" -v c="$1" -v label="$2" \
    'NR == int((n + 1) / 2) { print "# median ratio " label ": " $c }'
}
median 13 drv-2p/raw
median 14 drv-1p/raw
median 15 drv-zc/raw
median 16 drv-zh/raw
median 17 drv-2p/raw-cp
median 18 drv-r/raw-r
median 19 drv-nz/raw
[ "$goodput_only" = 1 ] && exit 0

perf() {  # perf TRANSPORT DENSITY [ENV...]
  local transport=$1 density=$2
  shift 2
  env "$@" "$build"/src/tools/sparcoll-run -n 2 --transport "$transport" --no-prefix -- "$build"/perf/sparcoll-perf \
    --elements 4194304 --density "$density" --iters 30 --warmup 3 --check $header --json "$build"/bench-dpdk.jsonl
  header=--no-header
}
echo "# block-sparse allreduce, 2 ranks, 4194304 x f32 (16 MiB), block 256"
header=""
for density in 0.01 0.1 1; do
  for transport in dpdk shm tcp; do perf $transport $density; done
done
echo "# dpdk with every 100th data frame dropped (1% loss, resent by the driver)"
for density in 0.01 0.1 1; do perf dpdk $density SPARCOLL_DPDK_DROP_EVERY=100; done
