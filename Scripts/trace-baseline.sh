#!/usr/bin/env bash
# Records what the simulator does for a fixed set of runs, so a refactor can be checked to change
# nothing: every seed's whole trace (`seed N --trace`) with its parameters, checks, trace hash and
# digest, in several variants (memory, --lmdb, --membership, replica counts), and every scenario's
# timeline and engine trace.
#
#   Scripts/trace-baseline.sh record OUT [SIM]   # writes one file a run under OUT
#   Scripts/trace-baseline.sh check OUT [SIM]    # records afresh and compares with OUT: exit 0 when identical
#
# SIM is the kidledger-sim binary (default: .build/release/kidledger-sim, built first when missing).
# SEEDS (default 70) sets how many seeds each variant runs. Scenario timelines are recorded with
# RUN_FLAGS (default --millis: each line's time as milliseconds, t=MILLIS, as the trace has it, not
# the readable "day 2 14:30"), so the events and digests compare whatever the readable format;
# a SIM from before --millis (issue 42; its timelines were t=MILLIS already) needs RUN_FLAGS=.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}; out=${2:-}; sim=${3:-.build/release/kidledger-sim}
if [[ -z "$mode" || -z "$out" || ( "$mode" != record && "$mode" != check ) ]]; then
    sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
    exit 64
fi
if [[ ! -x "$sim" ]]; then swift build -c release --product kidledger-sim 2>&1 | tail -n 1; fi
seeds=${SEEDS:-70}
run_flags=${RUN_FLAGS---millis}

record() {
    local dir=$1
    mkdir -p "$dir"
    local variants=("memory:" "lmdb:--lmdb" "membership:--membership" "replicas2:--replicas 2..2"
                    "replicas5:--replicas 5..5" "membership-lmdb:--membership --lmdb --replicas 3..4"
                    "hostile:--hostile" "hostile-lmdb:--hostile --lmdb")
    for v in "${variants[@]}"; do
        local name=${v%%:*} flags=${v#*:}
        for ((s = 1; s <= seeds; s++)); do
            # shellcheck disable=SC2086
            "$sim" seed "$s" $flags --trace > "$dir/$name-$s.txt" 2>&1 || echo "exit $?" >> "$dir/$name-$s.txt"
        done
        printf '.' >&2
    done
    for f in Simulations/*.scenario; do
        local base; base=$(basename "$f" .scenario)
        # shellcheck disable=SC2086
        "$sim" run "$f" $run_flags --trace "$dir/$base.trace" > "$dir/$base.txt" 2>&1 || echo "exit $?" >> "$dir/$base.txt"
    done
    echo >&2
}

if [[ "$mode" == record ]]; then
    record "$out"
    echo "recorded $(ls "$out" | wc -l) files in $out"
else
    fresh=$(mktemp -d)
    trap 'rm -rf "$fresh"' EXIT
    record "$fresh"
    if diff -r -q "$out" "$fresh" > "$fresh.diff"; then
        echo "identical: $(ls "$out" | wc -l) files"
        rm -f "$fresh.diff"
    else
        cat "$fresh.diff"; rm -f "$fresh.diff"
        echo "traces differ" >&2
        exit 1
    fi
fi
