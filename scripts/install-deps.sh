#!/usr/bin/env bash
# Installs everything sparcoll needs to build, test and benchmark, from Debian 12 packages.
# python3-torch and libtorch-dev: the PyTorch backend (python/) and its test suite.
# Idempotent: packages already present are not downloaded again. Runs apt as root (sudo if needed).
set -euo pipefail

packages=(
  build-essential g++ pkg-config meson ninja-build python3
  libtbb-dev libgtest-dev libgmock-dev
  libibverbs-dev librdmacm-dev ibverbs-providers rdma-core
  libdpdk-dev iproute2
  libopenmpi-dev openmpi-bin
  libgloo-dev
  zlib1g-dev
  python3-torch libtorch-dev
)

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
echo "install-deps: installing ${missing[*]}"
"${as_root[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
