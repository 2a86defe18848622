#!/bin/sh
# uninstalled_check.sh BUILD_DIR SCRATCH PORT: what a program built against the build tree sees
# through Meson's uninstalled pkg-config file (BUILD_DIR/meson-uninstalled/sparcoll-uninstalled.pc,
# found as "sparcoll" with PKG_CONFIG_PATH pointing there): the C program install_check.sh builds
# against the installed tree compiles with its flags alone (<sparcoll/sparcoll.h> from the source
# tree, the generated <sparcoll/version.h> from the build tree), links the build tree's
# libsparcoll.so and runs as a 2-process job over tcp.
# Prints "uninstalled-check: ok" last on success; a failure says which step and exits non-zero.
# Run by tests/install/install_test.cpp.
set -eu
build=$1
scratch=$2
port=$3
here=$(cd "$(dirname "$0")" && pwd)

fail() {
  echo "uninstalled-check: $*" >&2
  exit 1
}

[ -f "$build/meson-uninstalled/sparcoll-uninstalled.pc" ] || fail "no sparcoll-uninstalled.pc in $build/meson-uninstalled"
export PKG_CONFIG_PATH="$build/meson-uninstalled"
unset PKG_CONFIG_SYSROOT_DIR 2>/dev/null || true
flags=$(pkg-config --cflags --libs sparcoll) || fail "pkg-config --cflags --libs sparcoll failed"
mkdir -p "$scratch"
# shellcheck disable=SC2086 # $flags is a list of words
cc -std=c99 -Wall -Wextra -Werror -pedantic "$here/init_check.c" $flags -o "$scratch/init-check" ||
  fail "the C program does not build with the uninstalled file's flags: cc $flags"

export LD_LIBRARY_PATH="$build"
unset SPARCOLL_RANK SPARCOLL_WORLD_SIZE SPARCOLL_STORE RANK WORLD_SIZE MASTER_ADDR MASTER_PORT 2>/dev/null || true
timeout 60 "$scratch/init-check" 1 2 "127.0.0.1:$port" tcp >"$scratch/rank1.out" 2>&1 &
rank1=$!
status0=0
timeout 60 "$scratch/init-check" 0 2 "127.0.0.1:$port" tcp >"$scratch/rank0.out" 2>&1 || status0=$?
status1=0
wait "$rank1" || status1=$?
[ "$status0" = 0 ] && [ "$status1" = 0 ] ||
  fail "the C job failed (rank 0: $status0, rank 1: $status1): $(cat "$scratch/rank0.out" "$scratch/rank1.out")"
grep -q "^init-check: ok $build/libsparcoll.so" "$scratch/rank0.out" ||
  fail "rank 0 did not load $build/libsparcoll.so: $(cat "$scratch/rank0.out")"
echo "uninstalled-check: ok"
