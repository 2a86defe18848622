#!/bin/sh
# install_check.sh BUILD_DIR SCRATCH PORT: what a user of an installed sparcoll sees.
#   1. meson install --destdir SCRATCH, and the installed files are the expected ones;
#   2. a C and a C++ program are built against the installed tree through pkg-config only
#      (PKG_CONFIG_PATH and PKG_CONFIG_SYSROOT_DIR point into SCRATCH; no build-tree paths);
#   3. each runs as a real 2-process job: the C program joins with sparcoll_comm_init on
#      127.0.0.1:PORT, the C++ program under the installed sparcoll-run (with one installed
#      sparcoll-aggregator), both loading the installed libsparcoll.
# Prints "install-check: ok" last on success; a failure says which step and exits non-zero.
# Run by tests/install/install_test.cpp.
set -eu
build=$1
scratch=$2
port=$3
here=$(cd "$(dirname "$0")" && pwd)

fail() {
  echo "install-check: $*" >&2
  exit 1
}

meson install -C "$build" --no-rebuild --quiet --destdir "$scratch" >"$scratch.install.log" 2>&1 ||
  fail "meson install failed: $(cat "$scratch.install.log")"

pc=$(find "$scratch" -name sparcoll.pc -path '*/pkgconfig/*')
[ -n "$pc" ] || fail "sparcoll.pc was not installed"
include=$(find "$scratch" -type d -path '*/include/sparcoll')
[ -n "$include" ] || fail "include/sparcoll was not installed"
for header in sparcoll.h sparcoll.hpp communicator.hpp options.hpp status.hpp types.hpp version.h version.hpp; do
  [ -f "$include/$header" ] || fail "header $header was not installed"
done
for stray in meson.build version.h.in; do
  [ ! -e "$include/$stray" ] || fail "$stray was installed with the headers"
done
bindir=$(dirname "$(find "$scratch" -type f -name sparcoll-run)")
for tool in sparcoll-run sparcoll-aggregator sparcoll-perf; do
  [ -x "$bindir/$tool" ] || fail "tool $tool was not installed in $bindir"
done
libdir=$(dirname "$(dirname "$pc")")
[ -L "$libdir/libsparcoll.so" ] && [ -L "$libdir/libsparcoll.so.0" ] ||
  fail "libsparcoll.so and libsparcoll.so.0 are not symlinks in $libdir"
[ -f "$(readlink -f "$libdir/libsparcoll.so.0")" ] || fail "libsparcoll.so.0 points nowhere"

# pkg-config sees only the scratch tree's sparcoll.pc; the sysroot prefixes its -I and -L.
export PKG_CONFIG_PATH="$(dirname "$pc")"
export PKG_CONFIG_SYSROOT_DIR="$scratch"
flags=$(pkg-config --cflags --libs sparcoll) || fail "pkg-config --cflags --libs sparcoll failed"
case "$flags" in
  *"$build"*) fail "pkg-config flags name the build tree: $flags" ;;
esac
out="$scratch.programs"
mkdir -p "$out"
# shellcheck disable=SC2086 # $flags is a list of words
cc -std=c99 -Wall -Wextra -Werror -pedantic "$here/init_check.c" $flags -o "$out/init-check" ||
  fail "the C program does not build with: cc $flags"
# shellcheck disable=SC2086
c++ -std=c++17 -Wall -Wextra -Werror "$here/cpp_check.cpp" $flags -o "$out/cpp-check" ||
  fail "the C++ program does not build (C++17) with: c++ $flags"

# The installed library, not the build tree's or one installed on the system.
export LD_LIBRARY_PATH="$libdir"
unset SPARCOLL_RANK SPARCOLL_WORLD_SIZE SPARCOLL_STORE RANK WORLD_SIZE MASTER_ADDR MASTER_PORT 2>/dev/null || true

timeout 60 "$out/init-check" 1 2 "127.0.0.1:$port" tcp >"$out/rank1.out" 2>&1 &
rank1=$!
status0=0
timeout 60 "$out/init-check" 0 2 "127.0.0.1:$port" tcp >"$out/rank0.out" 2>&1 || status0=$?
status1=0
wait "$rank1" || status1=$?
[ "$status0" = 0 ] && [ "$status1" = 0 ] ||
  fail "the C job failed (rank 0: $status0, rank 1: $status1): $(cat "$out/rank0.out" "$out/rank1.out")"
for r in 0 1; do
  grep -q "^init-check: ok $libdir/libsparcoll.so" "$out/rank$r.out" ||
    fail "rank $r of the C job did not load $libdir/libsparcoll.so.0: $(cat "$out/rank$r.out")"
done

SPARCOLL_BLOCK_ELEMS=128 "$bindir/sparcoll-run" -n 2 --aggregators 1 --timeout 60 -- "$out/cpp-check" >"$out/cpp.out" 2>&1 ||
  fail "the C++ job under the installed sparcoll-run failed: $(cat "$out/cpp.out")"
# sparcoll-run prefixes each line with "[rank] ".
[ "$(grep -c "cpp-check: ok $libdir/libsparcoll.so" "$out/cpp.out")" = 2 ] ||
  fail "the C++ job did not pass on 2 ranks with $libdir/libsparcoll.so.0: $(cat "$out/cpp.out")"
echo "install-check: ok"
