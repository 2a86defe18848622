#!/usr/bin/env bash
# Configures (once) and builds sparcoll in ./build (release, tests included).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build/build.ninja ]; then
  meson setup build --buildtype=release >/dev/null
fi
ninja -C build
