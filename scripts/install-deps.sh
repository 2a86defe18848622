#!/usr/bin/env bash
# The project's one install step: every Debian 12 package that building, testing, the demo, the
# benchmarks and the development scripts use. Nothing here relies on a package's Recommends (apt
# runs with --no-install-recommends, as on a minimal machine): what the build compiles or links
# against is listed by name, and scripts/check-deps (run by scripts/test.sh) fails naming any
# package the build used that this list and its hard dependencies do not bring.
# Idempotent: when everything is installed it only asks dpkg. Runs apt as root (sudo if needed).
#   scripts/install-deps.sh            install what is missing
#   scripts/install-deps.sh --list     print the package list, one per line
set -euo pipefail

packages=(
  # build: compiler, build system, pkg-config (pkgconf), the core library's dependencies
  build-essential g++ pkg-config meson ninja-build git
  libtbb-dev zlib1g-dev
  # tests: GoogleTest, and Debian's interpreter for the summary and the dependency check
  libgtest-dev libgmock-dev python3
  # rdma driver (libibverbs), its tools, and the Soft-RoCE VM that runs its tests (scripts/rxe-vm:
  # qemu boots Debian's own kernel with a busybox initramfs; xz/zstd unpack kernel and modules)
  libibverbs-dev librdmacm-dev ibverbs-providers rdma-core ibverbs-utils perftest libibverbs1
  qemu-system-x86 busybox-static xz-utils zstd
  # dpdk driver; the network-namespace hosts (scripts/netns-cluster): iproute2 (ip, tc,
  # bridge) and ethtool (veth offloads off, or af_packet receivers see unchecksummed frames)
  libdpdk-dev iproute2 ethtool
  # benchmark peers (perf/peers/): Open MPI and Gloo
  libopenmpi-dev openmpi-bin libgloo-dev
  # the PyTorch backend (python/): torch, its C++ headers, and pybind11, which libtorch-dev's
  # headers include but which python3-torch only recommends
  python3-torch libtorch-dev pybind11-dev python3-dev
  # benchmarks' plots and the alpha-beta model (scripts/plot-perf, perf/model/)
  python3-matplotlib python3-numpy
  # gradient traces and the DDP step benchmark (perf/models/): OpenBLAS, which the rec and
  # transformer traces are recorded with (torch's default reference BLAS is 10-20x slower), and
  # the man pages the transformer language model is trained on
  libopenblas0-pthread manpages manpages-dev
  # scripts/check-fresh-install: a clean Debian 12 root to prove these two commands on
  mmdebstrap
  # the profiler docs/perf.md's profiles are taken with (perf record -a -g; software clock
  # events, since the VMs here expose no hardware counters)
  linux-perf
  # fuzzing (tests/fuzz, scripts/fuzz): clang, its runtimes with libFuzzer and the sanitizers,
  # and llvm for the coverage report (llvm-profdata, llvm-cov) and symbolized sanitizer reports
  clang libclang-rt-14-dev llvm
)

if [ "${1:-}" = --list ]; then
  printf '%s\n' "${packages[@]}"
  exit 0
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages already installed"
  exit 0
fi

as_root=()
[ "$(id -u)" -eq 0 ] || as_root=(sudo)
log=$(mktemp "${TMPDIR:-/tmp}/sparcoll-install-deps.XXXXXX")
trap 'rm -f "$log"' EXIT
echo "install-deps: installing ${#missing[@]} packages and what they depend on (downloads; minutes on a new machine): ${missing[*]}"
# apt's own output goes to a log; on failure its error lines are printed, never swallowed.
if ! "${as_root[@]}" apt-get update -qq >"$log" 2>&1; then
  echo "install-deps: error: apt-get update failed:" >&2
  grep -E '^(E|W|Err):' "$log" >&2 || tail -n 20 "$log" >&2
  exit 1
fi
if ! DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -q --no-install-recommends \
     "${missing[@]}" >"$log" 2>&1; then
  echo "install-deps: error: apt-get install failed:" >&2
  grep -E '^(E|Err):' "$log" >&2 || tail -n 20 "$log" >&2
  exit 1
fi
echo "install-deps: done ($(grep -c '^Setting up' "$log") packages set up)"
