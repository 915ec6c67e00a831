#!/usr/bin/env bash
# Scripts/profile-sync.sh BUILD_DIR OUT [COUNT]: callgrind instruction profile of the receiving
# `kidledger sync` process of an initial sync of COUNT (default 10000) transactions over loopback
# TCP, set up as Scripts/bench.sh does (owner home A with 10 children, home B joined before A
# holds transactions). Compare two builds' OUT files with callgrind_annotate --inclusive=yes.
set -euo pipefail
BIN=$1; OUT=$2; N=${3:-10000}
KL=$BIN/kidledger
D=$(mktemp -d)
DAEMON_PID=""
cleanup() { [ -n "$DAEMON_PID" ] && kill -TERM "$DAEMON_PID" 2>/dev/null; wait 2>/dev/null; rm -rf "$D"; }
trap cleanup EXIT
start_daemon() {
    "$KL" --home "$1" serve --listen 127.0.0.1:0 2> "$D/daemon.log" &
    DAEMON_PID=$!
    for _ in $(seq 1 200); do
        PORT=$(sed -n 's/.* on 127\.0\.0\.1:\([0-9]*\) .*/\1/p' "$D/daemon.log" | head -n 1)
        [ -n "$PORT" ] && return 0
        sleep 0.05
    done
    echo "the daemon did not start" >&2; cat "$D/daemon.log" >&2; exit 1
}
stop_daemon() { kill -TERM "$DAEMON_PID" 2>/dev/null || true; wait "$DAEMON_PID" 2>/dev/null || true; DAEMON_PID=""; }
"$KL" --home "$D/a" init "Profile family" >/dev/null
for i in $(seq 1 10); do "$KL" --home "$D/a" child add "Kid$i" >/dev/null; done
start_daemon "$D/a"
CODE=$("$KL" --home "$D/a" --json invite --address "127.0.0.1:$PORT" | python3 -c 'import json,sys; print(json.load(sys.stdin)["code"])')
"$KL" --home "$D/b" join "$CODE" >/dev/null
stop_daemon
"$BIN/kidledger-bench" append --store "$D/a/ledger" --count "$N" >/dev/null
start_daemon "$D/a"
valgrind --tool=callgrind --callgrind-out-file="$OUT" "$KL" --home "$D/b" --json sync "127.0.0.1:$PORT" 2>&1 >/dev/null | grep -E "Collected" || true
