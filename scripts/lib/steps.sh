# Steps of the README commands (sourced by scripts/build.sh, demo.sh, test.sh): each says what it
# is doing, keeps its tool's chatter in a log, says it is still alive during long silences, and
# on failure prints the step, the failing command and its first error lines before it exits.
# A newcomer never faces minutes of silence or an exit without a reason.

# How often a quiet step says it is still running.
step_heartbeat_s=30

# step_errors LOG: the lines of LOG that say what went wrong, most useful first: ninja's failed
# target and the command after it, the compiler's first errors (with their file:line), Meson's
# and apt's error lines; the log's last lines when none of those is found.
step_errors() {
  local log=$1 found
  # Compilers colour their messages (meson asks for it); the escapes go before matching.
  found=$(sed 's/\x1b\[[0-9;]*[mK]//g' "$log" | awk '
    /^FAILED: / { print; getline; print substr($0, 1, 600); n++; next }
    /(fatal )?error:|^ERROR:|^E: |^Err:|undefined reference|Traceback|No such file/ { if (e++ < 12) print substr($0, 1, 400) }
  ' | head -n 24)
  if [ -n "$found" ]; then
    printf '%s\n' "$found"
  else
    tail -n 20 "$log"
  fi
}

# run_step TITLE LOG CMD...: prints "TITLE", runs CMD with its output in LOG, prints the log's
# newest line every $step_heartbeat_s seconds while CMD runs, and returns CMD's exit status.
# On failure it prints the step, the command and step_errors of LOG first.
run_step() {
  local title=$1 log=$2
  shift 2
  mkdir -p "$(dirname "$log")"
  echo "$title (log: $log)"
  local start=$SECONDS
  "$@" >"$log" 2>&1 &
  local pid=$! status=0
  while kill -0 "$pid" 2>/dev/null; do
    local waited=0
    while [ "$waited" -lt "$step_heartbeat_s" ] && kill -0 "$pid" 2>/dev/null; do
      sleep 1
      waited=$((waited + 1))
    done
    if kill -0 "$pid" 2>/dev/null; then
      local last
      last=$(tail -n 1 "$log" 2>/dev/null | cut -c1-160)
      echo "  ... $((SECONDS - start)) s: ${last:-(no output yet)}"
    fi
  done
  wait "$pid" || status=$?
  if [ "$status" -ne 0 ]; then
    echo "error: step failed: $title (exit status $status)" >&2
    echo "error: command: $*" >&2
    step_errors "$log" | sed 's/^/  | /' >&2
    echo "error: the whole output is in $log" >&2
  fi
  return "$status"
}

# run_live TITLE LOG CMD...: like run_step, but CMD's output is shown as it comes (and kept in
# LOG); when CMD has printed nothing for $step_heartbeat_s seconds, a line says it is still
# running. For steps whose own output is the progress (a test run).
run_live() {
  local title=$1 log=$2
  shift 2
  mkdir -p "$(dirname "$log")"
  echo "$title (log: $log)"
  local start=$SECONDS
  ( "$@" 2>&1; echo "$?" >"$log.status" ) | tee "$log" &
  local pid=$! quiet=0 size=-1
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    local now
    now=$(stat -c %s "$log" 2>/dev/null || echo 0)
    if [ "$now" != "$size" ]; then
      size=$now
      quiet=0
    else
      quiet=$((quiet + 1))
      if [ "$quiet" -ge "$step_heartbeat_s" ]; then
        echo "  ... $((SECONDS - start)) s: still running"
        quiet=0
      fi
    fi
  done
  wait "$pid" || true
  local status
  status=$(cat "$log.status" 2>/dev/null || echo 1)
  rm -f "$log.status"
  if [ "$status" -ne 0 ]; then
    echo "error: step failed: $title (exit status $status)" >&2
    echo "error: command: $*" >&2
  fi
  return "$status"
}
