#!/usr/bin/env bash
# Configures (once) and builds sparcoll in ./build (release, tests included). It says what it is
# doing; the tools' output goes to logs under build/ and, when a step fails, the failing command
# and its first errors are printed (scripts/lib/steps.sh). Features that could not be built
# because an optional package is absent are named, with the package.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/steps.sh

if [ ! -f build/build.ninja ]; then
  # meson setup makes build/ itself; its log lands there once it exists.
  setup_log=$(mktemp "${TMPDIR:-/tmp}/sparcoll-setup.XXXXXX")
  if ! run_step "build: configuring build/ (meson setup)" "$setup_log" meson setup build --buildtype=release; then
    [ -d build ] && cp "$setup_log" build/setup.log
    rm -f "$setup_log"
    exit 1
  fi
  mv "$setup_log" build/setup.log
  grep '^Message: feature not built' build/setup.log | sed 's/^Message: /build: warning: /' || true
fi
run_step "build: compiling (ninja; about 10 minutes on 2 cores from scratch)" build/build.log ninja -C build
echo "build: done"
