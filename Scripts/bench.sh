#!/usr/bin/env bash
# The performance benchmarks of docs/PERFORMANCE.md: builds release binaries, measures every row
# (the median of several runs), prints one table and writes it as JSON.
#
#   Scripts/bench.sh            full run: N = 1k, 10k, 100k, 1M; 1,000 simulator seeds with and without the determinism rerun, 3 rounds (3 to 5 minutes on 2 cores)
#   Scripts/bench.sh --quick    smoke run: N = 1k, 10k; 20 seeds; 5 latency trials (a minute or two)
#
# Options: --out FILE (JSON, default bench-results.json), --runs R (runs per row, default 5,
# 3 for N >= 100k; each run of an N appends, measures the floor (and Yrs at 100k) and syncs, as one round;
# whole-process rows take 21 interleaved rounds, incremental rows 41, the simulator's rows 3), --sizes "N ..." and --seeds S override the mode's sizes and seed count,
# --seeds 0 skips the simulator, --latency T sets the change-to-visible trials per setting (default 20; 0
# skips them; Scripts/latency.py: loopback, and as root 12 % loss between two network namespaces), --work DIR keeps the homes there (default: a temporary directory, removed at the end).
# Environment: SCRATCH (SwiftPM scratch path, default .build).
# Environment: IDLE_SECONDS (the idle row's measured minute, default 60). Not run in CI. Everything runs on this machine: the two kidledger processes talk over loopback.
set -euo pipefail
# Everything runs inside main, so bash has read the whole script before it starts (editing the
# file during a long run cannot change what runs).
main() {
cd "$(dirname "$0")/.."
REPO=$PWD

MODE=full
OUT=bench-results.json
RUNS=5
PROC_RUNS=21
# Incremental sessions take 3-6 ms, most of it two fdatasyncs whose latency swings by 2x from one
# to the next: more rounds than the whole-process rows, so the medians settle.
INC_RUNS=41
# The simulator's rows: rounds of 1,000 seeds with and without the determinism rerun (about 30 s each).
SIM_RUNS=3
SIZES=""
SEEDS=""
LATENCY=""
WORK=""
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) MODE=quick ;;
        --out) OUT=$2; shift ;;
        --runs) RUNS=$2; shift ;;
        --sizes) SIZES=$2; shift ;;
        --seeds) SEEDS=$2; shift ;;
        --latency) LATENCY=$2; shift ;;
        --work) WORK=$2; shift ;;
        *) echo "usage: Scripts/bench.sh [--quick] [--out FILE] [--runs R] [--sizes \"N ...\"] [--seeds S] [--latency T] [--work DIR]" >&2; exit 64 ;;
    esac
    shift
done
if [ "$MODE" = quick ]; then
    SIZES=${SIZES:-"1000 10000"}
    SEEDS=${SEEDS:-20}
    LATENCY=${LATENCY:-5}
    RUNS=3
    PROC_RUNS=7
    INC_RUNS=7
else
    SIZES=${SIZES:-"1000 10000 100000 1000000"}
    SEEDS=${SEEDS:-1000}
    LATENCY=${LATENCY:-20}
fi
# The Yrs peer gets the transactions of N = 100k (or the largest N below it).
YRS_N=0
for n in $SIZES; do if [ "$n" -le 100000 ] && [ "$n" -gt "$YRS_N" ]; then YRS_N=$n; fi; done

started=$(date +%s)
Scripts/setup.sh >/dev/null
SCRATCH=${SCRATCH:-$REPO/.build}
PRODUCTS="kidledger kidledger-bench"
[ "$SEEDS" -gt 0 ] && PRODUCTS="$PRODUCTS kidledger-sim"
for product in $PRODUCTS; do
    swift build -c release --scratch-path "$SCRATCH" --product "$product" 2>&1 | tail -n 1
done
BIN=$SCRATCH/release
KL=$BIN/kidledger
BENCH=$BIN/kidledger-bench

# A local virtual environment with pycrdt (Yrs) for the peer comparison.
VENV=$REPO/.bench/venv
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import pycrdt" 2>/dev/null; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --upgrade pycrdt
fi

if [ -z "$WORK" ]; then
    WORK=$(mktemp -d /tmp/kidledger-bench.XXXXXX)
    trap 'stop_daemon; rm -rf "$WORK"' EXIT
else
    mkdir -p "$WORK"
    trap 'stop_daemon' EXIT
fi
RESULTS=$WORK/results.jsonl
: > "$RESULTS"
echo "{\"row\":\"meta\",\"mode\":\"$MODE\",\"runs\":$RUNS,\"procRuns\":$PROC_RUNS,\"incRuns\":$INC_RUNS,\"simRuns\":$SIM_RUNS,\"sizes\":[${SIZES// /,}],\"seeds\":$SEEDS,\"cpus\":$(nproc),\"commit\":\"$(git rev-parse --short HEAD 2>/dev/null || echo unknown)\",\"date\":\"$(date -u +%Y-%m-%dT%H:%MZ)\",\"pycrdt\":\"$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("pycrdt"))')\"}" >> "$RESULTS"

say() { echo "[$(date +%H:%M:%S)] $*" >&2; }
record() { echo "$1" >> "$RESULTS"; }

DAEMON_PID=""
DAEMONS=""
PORT=""
# Starts the daemon of home $1 on a free loopback port (sets DAEMON_PID and PORT).
# shellcheck source=Scripts/lib/daemon.sh
. "$(dirname "$0")/lib/daemon.sh"
start_daemon() { start_daemon_of "$KL" "$1"; }
# Stops it, and the daemons of the incremental rounds ($DAEMONS) when they run.
stop_daemon() {
    local pid
    for pid in $DAEMON_PID $DAEMONS; do
        kill -TERM "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    DAEMON_PID=""; DAEMONS=""
}
# The daemon's peak resident memory so far, in KiB (LMDB's mapped file pages it touched included).
daemon_hwm() { sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$DAEMON_PID/status"; }
# A JSON field of a one-line document.
field() { python3 -c "import json,sys; d=json.loads(sys.argv[1]); print(eval(sys.argv[2], {}, {'d': d}))" "$1" "$2"; }

# $SIZES rotated left by $1 places: round r of an interleaved row starts at a different N each
# time, so no N always follows the same one (an fdatasync pays for whatever the one before left).
rotated() {
    local -a sizes=($SIZES)
    local k=$(( $1 % ${#sizes[@]} ))
    echo "${sizes[@]:k} ${sizes[@]:0:k}"
}
runs_for() { if [ "$1" -ge 100000 ] && [ "$RUNS" -gt 3 ]; then echo 3; else echo "$RUNS"; fi; }

for N in $SIZES; do
    R=$(runs_for "$N")
    D=$WORK/n$N
    rm -rf "$D"; mkdir -p "$D"
    say "N=$N: homes"
    # Home A (the owner's) with 10 children; home B joins it while A holds no transactions yet.
    "$KL" --home "$D/a" init "Bench family" >/dev/null
    for i in $(seq 1 10); do "$KL" --home "$D/a" child add "Kid$i" >/dev/null; done
    start_daemon "$D/a"
    CODE=$("$KL" --home "$D/a" --json invite --address "127.0.0.1:$PORT" | python3 -c 'import json,sys; print(json.load(sys.stdin)["code"])')
    "$KL" --home "$D/b" join "$CODE" >/dev/null
    stop_daemon
    cp -a "$D/a" "$D/a0"; cp -a "$D/b" "$D/b0"

    # Round by round: append (and the floor), Yrs at YRS_N, then the initial sync of what was just
    # appended. Each round's ratios (sync / floor, sync / Yrs) then pair figures taken seconds apart,
    # not phases minutes apart: this machine's speed drifts by a fifth within minutes.
    say "N=$N: $R rounds of append through the store API with the raw LMDB floor$([ "$N" = "$YRS_N" ] && echo ", Yrs (pycrdt)"), and the initial sync over loopback TCP"
    for r in $(seq 1 "$R"); do
        rm -rf "$D/a"; cp -a "$D/a0" "$D/a"
        tsv=""
        if [ "$N" = "$YRS_N" ]; then tsv="--tsv $WORK/yrs.tsv"; fi
        line=$("$BENCH" append --store "$D/a/ledger" --count "$N" $tsv)
        record "{\"row\":\"append\",\"n\":$N,\"run\":$r,\"result\":$line}"
        if [ "$N" = "$YRS_N" ]; then
            record "{\"row\":\"yrs\",\"n\":$N,\"run\":$r,\"result\":$("$VENV/bin/python" Scripts/bench-yrs.py --runs 1 "$WORK/yrs.tsv")}"
        fi
        rm -rf "$D/b"; cp -a "$D/b0" "$D/b"
        # The copy leaves up to hundreds of MB of dirty page cache; flushed now, its writeback
        # does not land inside the measured sync (it made the durable commits wait behind it).
        sync
        start_daemon "$D/a"
        proc=$("$BENCH" run --runs 1 --watch "$DAEMON_PID" --out "$WORK/sync.json" -- "$KL" --home "$D/b" --json sync "127.0.0.1:$PORT")
        hwm=$(daemon_hwm)
        stop_daemon
        record "{\"row\":\"sync\",\"n\":$N,\"run\":$r,\"process\":$proc,\"session\":$(cat "$WORK/sync.json"),\"daemonHWMKiB\":$hwm}"
    done
    rm -rf "$D/a0"
    da=$("$KL" --home "$D/a" digest); db=$("$KL" --home "$D/b" digest)
    if [ "$da" != "$db" ]; then echo "N=$N: the replicas disagree after the sync: $da vs $db" >&2; exit 1; fi

    rm -rf "$D/b0"   # B stays (synced) for the incremental rounds below
done

# Incremental syncs, interleaved round by round across every N like the whole-process rows, with
# one daemon per N running side by side: the disk's state after the initial syncs (each wrote up
# to hundreds of MB) then weighs on every N alike instead of on whichever N came last.
say "incremental sync of one change: $INC_RUNS interleaved rounds"
sync; sleep 5   # what the initial syncs and copies left to write back, and a moment for the disk to settle
declare -A INC_PORT   # N -> the port of its daemon
for N in $SIZES; do
    start_daemon "$WORK/n$N/a"
    INC_PORT[$N]=$PORT
    DAEMONS="$DAEMONS $DAEMON_PID"; DAEMON_PID=""
done
for r in $(seq 1 "$INC_RUNS"); do
    for N in $(rotated "$r"); do
        D=$WORK/n$N
        "$KL" --home "$D/a" give Kid2 0.25 --note incremental >/dev/null
        proc=$("$BENCH" run --runs 1 --out "$WORK/sync.json" -- "$KL" --home "$D/b" --json sync "127.0.0.1:${INC_PORT[$N]}")
        record "{\"row\":\"incremental\",\"n\":$N,\"run\":$r,\"process\":$proc,\"session\":$(cat "$WORK/sync.json")}"
    done
done
stop_daemon
for N in $SIZES; do
    D=$WORK/n$N
    da=$("$KL" --home "$D/a" digest); db=$("$KL" --home "$D/b" digest)
    if [ "$da" != "$db" ]; then echo "N=$N: the replicas disagree after the incremental syncs" >&2; exit 1; fi
    rm -rf "$D/b"
done

# Whole processes, interleaved round by round (version, then give and balance at every N), so the
# noise of a shared machine falls on all of them alike.
say "whole processes: $PROC_RUNS interleaved rounds (after one warm-up round)"
for r in $(seq 0 "$PROC_RUNS"); do
    line=$("$BENCH" run --runs 1 -- "$KL" --version)
    [ "$r" -gt 0 ] && record "{\"row\":\"proc\",\"cmd\":\"version\",\"run\":$r,\"result\":$line}"
    for N in $(rotated "$r"); do
        line=$("$BENCH" run --runs 1 -- "$KL" --home "$WORK/n$N/a" give Kid1 1.25 --note bench)
        [ "$r" -gt 0 ] && record "{\"row\":\"proc\",\"cmd\":\"give\",\"n\":$N,\"run\":$r,\"result\":$line}"
        line=$("$BENCH" run --runs 1 -- "$KL" --home "$WORK/n$N/a" balance)
        [ "$r" -gt 0 ] && record "{\"row\":\"proc\",\"cmd\":\"balance\",\"n\":$N,\"run\":$r,\"result\":$line}"
    done
done
for N in $SIZES; do rm -rf "$WORK/n$N"; done

if [ "$SEEDS" -gt 0 ]; then
    # As CI runs it (each seed twice: the determinism check), and the same seeds run once each:
    # the simulator's own speed on the same mix. $SIM_RUNS rounds of both, the order alternating
    # from round to round, so a slow minute falls on both rows alike.
    say "simulator: $SEEDS standard seeds on $(nproc) cores, with the determinism rerun and without, $SIM_RUNS rounds"
    for r in $(seq 1 "$SIM_RUNS"); do
        if [ $(( r % 2 )) -eq 1 ]; then kinds="simulator simulatorOnce"; else kinds="simulatorOnce simulator"; fi
        for kind in $kinds; do
            flags=""
            [ "$kind" = simulatorOnce ] && flags="--no-rerun"
            proc=$("$BENCH" run --runs 1 --any-status --out "$WORK/sim.txt" -- "$BIN/kidledger-sim" fuzz --seeds "$SEEDS" --jobs "$(nproc)" $flags)
            summary=$(grep '^seeds=' "$WORK/sim.txt")
            record "{\"row\":\"$kind\",\"seeds\":$SEEDS,\"run\":$r,\"process\":$proc,\"summary\":\"$summary\"}"
        done
    done
fi

if [ "$LATENCY" -gt 0 ]; then
    # Issue 22, point 9: how long after a `give` on one laptop returns it shows on the other.
    say "latency: $LATENCY changes each way between two running daemons, on loopback and under 12 % loss"
    python3 Scripts/latency.py "$KL" "$LATENCY" "$RESULTS"
fi

# Issue 44, point 7: the initial sync through the relay against the direct one, same homes, same
# run (Scripts/relay-bench.sh), at 100k (or the largest N below it), and the relay's bytes stored.
say "relay: the initial sync of $YRS_N transactions through the relay and directly, $(runs_for "$YRS_N") rounds"
record "$(RELAY_BENCH_JSON=1 KL="$KL" BENCH="$BENCH" Scripts/relay-bench.sh "$YRS_N" "$(runs_for "$YRS_N")" 2>/dev/null | tail -n 1)"

# Issue 40, point 4: the daemon at rest (no change, its one peer out of reach, the page closed):
# wakeups and CPU per minute from /proc over a minute (Scripts/idle.sh; IDLE_SECONDS overrides).
say "idle: the daemon at rest for ${IDLE_SECONDS:-60} s (wakeups and CPU from /proc)"
record "$(Scripts/idle.sh "$KL" "${IDLE_SECONDS:-60}" 2>/dev/null | tail -n 1)"

record "{\"row\":\"elapsed\",\"seconds\":$(( $(date +%s) - started ))}"
python3 Scripts/bench-report.py "$RESULTS" "$OUT"
}
main "$@"
