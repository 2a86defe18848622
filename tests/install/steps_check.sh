#!/bin/bash
# steps_check.sh SOURCE_DIR: the README commands' steps (scripts/lib/steps.sh) never fail
# silently: a failing step prints its title, the command and the error lines of its log (a
# compiler's first error behind ninja's FAILED line, apt's E: line), and returns the command's
# status; a step that works prints only its title.
set -u
. "$1/scripts/lib/steps.sh"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
fail() { echo "steps-check: $*"; exit 1; }

out=$(run_step "build: compiling" "$scratch/ok.log" sh -c 'echo "[1/2] compiling a.cpp"' 2>&1) || fail "a working step failed"
[ "$out" = "build: compiling (log: $scratch/ok.log)" ] || fail "a working step printed more than its title: $out"

status=0
out=$(run_step "build: compiling" "$scratch/build.log" sh -c '
  echo "[1/9] Compiling C++ object a.o"
  echo "FAILED: src/b.o"
  echo "c++ -Iinclude -c ../src/b.cpp -o src/b.o"
  echo "../src/b.cpp:12:3: error: expected ; before }"
  echo "ninja: build stopped: subcommand failed."
  exit 3' 2>&1) || status=$?
[ "$status" = 3 ] || fail "run_step returned $status, not the command's 3"
for want in "step failed: build: compiling (exit status 3)" "FAILED: src/b.o" "c++ -Iinclude -c ../src/b.cpp" \
            "../src/b.cpp:12:3: error: expected ; before }" "$scratch/build.log"; do
  case "$out" in *"$want"*) ;; *) fail "the failure output lacks '$want': $out" ;; esac
done

status=0
out=$(run_step "install" "$scratch/apt.log" sh -c 'echo "Reading package lists..."; echo "E: Unable to locate package nosuch"; exit 100' 2>&1) ||
  status=$?
[ "$status" = 100 ] || fail "run_step returned $status, not apt's 100"
case "$out" in *"E: Unable to locate package nosuch"*) ;; *) fail "apt's error line was not printed: $out" ;; esac

status=0
out=$(run_live "tests" "$scratch/live.log" sh -c 'echo "1/1 suite FAIL"; exit 4' 2>&1) || status=$?
[ "$status" = 4 ] || fail "run_live returned $status, not the command's 4"
case "$out" in *"1/1 suite FAIL"*"step failed: tests"*) ;; *) fail "run_live did not show the output and the failure: $out" ;; esac
echo "steps-check: ok"
