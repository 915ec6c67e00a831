#!/usr/bin/env bash
# The daemon at rest (issue 40, point 4; docs/PERFORMANCE.md, "Idle"): a household with a child
# and one known peer that is not running (no peer in reach), the daemon serving its page (closed)
# on 127.0.0.1 only, nothing changing. After it settles, counts over SECONDS (60 unless given)
# every thread's context switches (/proc/PID/task/*/status, voluntary + nonvoluntary: each is a
# wakeup) and the process's CPU time (/proc/PID/stat utime + stime), and prints one JSON line:
#   {"row":"idle","seconds":S,"threads":T,"wakeupsPerMinute":W,"cpuMillisPerMinute":C,"cpuPercent":P,"perThread":{...}}
# Then it checks that a change made by another process still reaches the peer within a second
# (the daemon is woken by the commit, not by polling): "pushMillis" in the line.
#
#   Scripts/idle.sh KIDLEDGER_BINARY [SECONDS]     (SETTLE=S: seconds to wait before measuring, default 30)
set -euo pipefail
bin="${1:?usage: Scripts/idle.sh KIDLEDGER_BINARY [SECONDS]}"
seconds="${2:-60}"
work="$(mktemp -d /tmp/kidledger-idle.XXXXXX)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
a="$work/a" b="$work/b"
"$bin" --home "$a" init "Idle family" >/dev/null
"$bin" --home "$a" child add Ava >/dev/null
wait_for() { for _ in $(seq 1 100); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done; echo "idle: timed out waiting for '$2' in $1" >&2; cat "$1" >&2; exit 1; }
# B: a second laptop that has joined; it is stopped while A rests, so A's one peer is out of reach.
"$bin" --home "$a" serve --listen 127.0.0.1:0 --ui off 2>"$work/a0.log" & pids+=($!)
wait_for "$work/a0.log" "serving"
a_addr="$(grep -o 'on 127\.0\.0\.1:[0-9]*' "$work/a0.log" | head -n 1 | cut -d' ' -f2)"
code="$("$bin" --home "$a" invite --address "$a_addr" | grep -o 'KL1-[A-Za-z0-9_-]*')"
"$bin" --home "$b" join "$code" >/dev/null
kill "${pids[0]}"; wait "${pids[0]}" 2>/dev/null || true; pids=()
"$bin" --home "$b" serve --listen 127.0.0.1:0 --ui off 2>"$work/b.log" & bpid=$!
wait_for "$work/b.log" "serving"
b_addr="$(grep -o 'on 127\.0\.0\.1:[0-9]*' "$work/b.log" | head -n 1 | cut -d' ' -f2)"
kill "$bpid"; wait "$bpid" 2>/dev/null || true
"$bin" --home "$a" peer add "$b_addr" >/dev/null
"$bin" --home "$a" serve --listen 127.0.0.1:0 --ui 127.0.0.1:0 2>"$work/a.log" & pid=$!; pids+=($pid)
wait_for "$work/a.log" "page on http"
# Start-up work ends, and the backoff toward the unreachable peer reaches its cap (ceilings 0.5 s
# doubling to 60 s, about 30 s in all): the minute measured is one of the laptop's day.
sleep "${SETTLE:-30}"
sample() {
  local switches=0 t
  for t in /proc/"$pid"/task/*; do
    switches=$((switches + $(awk '/^(voluntary|nonvoluntary)_ctxt_switches/ {s += $2} END {print s}' "$t/status")))
  done
  # utime and stime: fields 14 and 15 of /proc/PID/stat (after the command name in parentheses).
  local ticks; ticks=$(sed 's/^.*) //' /proc/"$pid"/stat | awk '{print $12 + $13}')
  echo "$switches $ticks"
}
per_thread() {
  local t
  for t in /proc/"$pid"/task/*; do
    printf '%s %s\n' "$(cat "$t/comm")-${t##*/}" "$(awk '/^(voluntary|nonvoluntary)_ctxt_switches/ {s += $2} END {print s}' "$t/status")"
  done
}
read -r s0 c0 < <(sample); per_thread > "$work/t0"
started=$(date +%s%N)
sleep "$seconds"
read -r s1 c1 < <(sample); per_thread > "$work/t1"
elapsed=$(( $(date +%s%N) - started ))
hz=$(getconf CLK_TCK)
threads=$(ls /proc/"$pid"/task | wc -l)
# A local change by another process reaches B within a second: B runs again, A pushes on the commit.
"$bin" --home "$b" serve --listen "$b_addr" --ui off 2>>"$work/b.log" & pids+=($!)
wait_for "$work/b.log" "serving \""
sleep 2  # A's backoff toward B may run up to its cap: give both a moment, then time the push alone
"$bin" --home "$a" sync >/dev/null 2>&1 || true
t0=$(date +%s%N)
"$bin" --home "$a" give Ava 1 --note idle-check >/dev/null
push=""
for _ in $(seq 1 300); do
  if [ "$("$bin" --home "$b" --json balance Ava 2>/dev/null | grep -o '"balanceCents":[0-9]*' | cut -d: -f2)" = 100 ]; then
    push=$(( ($(date +%s%N) - t0) / 1000000 )); break
  fi
  sleep 0.01
done
python3 - "$s0" "$s1" "$c0" "$c1" "$elapsed" "$hz" "$threads" "${push:-null}" "$work/t0" "$work/t1" <<'PY'
import json, sys
s0, s1, c0, c1 = (int(x) for x in sys.argv[1:5])
elapsed, hz, threads = int(sys.argv[5]) / 1e9, int(sys.argv[6]), int(sys.argv[7])
push = None if sys.argv[8] == "null" else int(sys.argv[8])
def table(path):
    return dict(line.rsplit(" ", 1) for line in open(path).read().split("\n") if line)
t0, t1 = table(sys.argv[9]), table(sys.argv[10])
per = {k: round((int(v) - int(t0.get(k, 0))) * 60 / elapsed, 1) for k, v in t1.items()}
cpu_ms = (c1 - c0) * 1000 / hz * 60 / elapsed
print(json.dumps({"row": "idle", "seconds": round(elapsed, 1), "threads": threads,
                  "wakeupsPerMinute": round((s1 - s0) * 60 / elapsed, 1), "cpuMillisPerMinute": round(cpu_ms, 1),
                  "cpuPercent": round(cpu_ms / 600, 4), "pushMillis": push, "perThread": per}))
PY
