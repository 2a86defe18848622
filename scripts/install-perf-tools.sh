#!/usr/bin/env bash
# Optional extras of the perf suite, from Debian 12 packages: PyTorch (scripts/make-gradient-trace,
# which records perf/data/*.sgtrace), matplotlib and NumPy (scripts/plot-perf, perf/model/).
# The C++ trace loader (perf/lib/trace.cpp) needs zlib1g-dev at build time; libdpdk-dev from
# scripts/install-deps.sh already depends on it, it is listed here too.
# Idempotent; runs apt as root (sudo if needed). Use Debian's interpreter, /usr/bin/python3.
set -euo pipefail

packages=(python3 python3-torch python3-matplotlib python3-numpy zlib1g-dev)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-perf-tools: all ${#packages[@]} packages already installed"
  exit 0
fi

as_root=()
[ "$(id -u)" -eq 0 ] || as_root=(sudo)
echo "install-perf-tools: installing ${missing[*]}"
"${as_root[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-perf-tools: done"
