#!/bin/bash
# The initial sync of N transactions through the relay against the direct one, in the same run
# (issue 44, point 7), on 127.0.0.1 with release binaries:
#   direct: Dad's `sync 127.0.0.1:PORT` against Mom's daemon;
#   relay:  Mom's `relay sync` (upload) then Dad's `relay sync` (download), the relay fresh each round.
# Each round starts from the same homes (copies) and the same N transactions appended through the
# store API (kidledger-bench append, as Scripts/bench.sh does), one change per transaction.
# Prints every round, the medians, relay / direct (upload and download together: the family's
# first sync through the relay) and download / direct (a laptop's initial sync from a relay that
# already holds the changes), and the relay store's bytes per transaction.
# Usage: Scripts/relay-bench.sh [N] [ROUNDS]   (defaults 100000 and 3; RELAY_BENCH_JSON=1: one JSON row)
# Builds the release kidledger and kidledger-bench first, so they are current (Scripts/lib/release-binaries.sh);
# KL=PATH BENCH=PATH use others.
set -euo pipefail
N=${1:-100000}
ROUNDS=${2:-3}
. "$(dirname "$0")/lib/release-binaries.sh"
D=$(mktemp -d /tmp/relay-bench-XXXXXX)
export HOME="$D" TZ=UTC LC_ALL=C
PIDS=()
cleanup() { [ -s "$D/relay.err" ] && [ "${KEEP_LOG:-}" = 1 ] && tail -5 "$D/relay.err" >&2; for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$D"; }
trap cleanup EXIT
say() { echo "relay-bench: $*" >&2; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# wait_for FILE PATTERN: polls for at most 30 s.
wait_for() { local i=0; while ! grep -qs "$2" "$1" && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done; grep -qs "$2" "$1"; }
# The relay keeps one port across restarts: the grant names its address.
RELAY_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# Each start removes the previous log first: the shell truncates it in the child, which may come
# after the parent's first look, which would then find the previous process's line.
start_relay() {
    rm -f "$D/relay.err"
    "$KL" --home "$D/relay" relay serve --listen "127.0.0.1:$RELAY_PORT" >"$D/relay.out" 2>"$D/relay.err" & RELAY_PID=$!
    PIDS+=("$RELAY_PID")
    wait_for "$D/relay.err" "relay serving on" || { cat "$D/relay.err" >&2; exit 1; }
}
stop_pid() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }
start_mom() {
    rm -f "$D/mom.err"
    "$KL" --home "$D/a" serve --listen 127.0.0.1:0 --ui off --no-discovery 2>"$D/mom.err" & MOM_PID=$!
    PIDS+=("$MOM_PID")
    wait_for "$D/mom.err" "serving .* on 127\.0\.0\.1:[0-9]" || { cat "$D/mom.err" >&2; exit 1; }
    MOM_ADDR=$(grep "serving .* on " "$D/mom.err" | grep -o '127\.0\.0\.1:[0-9]*' | head -1)
}

say "homes: Mom with 10 children, the relay added, Dad joined"
"$KL" --home "$D/a" init "Bench family" >/dev/null
for i in $(seq 1 10); do "$KL" --home "$D/a" child add "Kid$i" >/dev/null; done
start_relay
wait_for "$D/relay/relay-code.txt" "KLR1-"
"$KL" --home "$D/a" relay add "$(cat "$D/relay/relay-code.txt")" >/dev/null
start_mom
INVITE=$("$KL" --home "$D/a" --json invite --address "$MOM_ADDR" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["code"])')
"$KL" --home "$D/b" join "$INVITE" --name Dad >/dev/null
stop_pid "$MOM_PID"
# Mom's relay session puts Dad's published key on the access list before any measurement.
"$KL" --home "$D/a" relay sync >/dev/null
"$KL" --home "$D/b" relay sync >/dev/null
stop_pid "$RELAY_PID"
cp -a "$D/a" "$D/a0"; cp -a "$D/b" "$D/b0"; cp -a "$D/relay" "$D/relay0"

direct=(); relay=(); up=(); down=(); perTxn=()
for r in $(seq 1 "$ROUNDS"); do
    rm -rf "$D/a" "$D/b" "$D/relay"; cp -a "$D/a0" "$D/a"; cp -a "$D/b0" "$D/b"; cp -a "$D/relay0" "$D/relay"
    "$BENCH" append --store "$D/a/ledger" --count "$N" >/dev/null
    sync
    start_mom
    t0=$(now_ms); "$KL" --home "$D/b" sync "$MOM_ADDR" >/dev/null; t1=$(now_ms)
    stop_pid "$MOM_PID"
    direct+=($((t1 - t0)))
    da=$("$KL" --home "$D/a" digest); db=$("$KL" --home "$D/b" digest)
    [ "$da" = "$db" ] || { echo "round $r: the direct sync left the replicas different" >&2; exit 1; }

    rm -rf "$D/b"; cp -a "$D/b0" "$D/b"; sync
    start_relay
    before=$(du -B1 "$D/relay/relay/data.mdb" | cut -f1)
    t0=$(now_ms); "$KL" --home "$D/a" --json relay sync >"$D/up.json" 2>&1 || { echo "round $r: Mom's relay sync failed:" >&2; cat "$D/up.json" >&2; exit 1; }; t1=$(now_ms)
    # What the relay stores for the N transactions: its file's allocated bytes grown by the upload
    # (LMDB pages: envelopes, headers, B-tree), before Dad's download lets it collect them.
    bytes=$(( $(du -B1 "$D/relay/relay/data.mdb" | cut -f1) - before ))
    perTxn+=($((bytes / N)))
    t1b=$(now_ms); "$KL" --home "$D/b" --json relay sync >"$D/down.json" 2>&1 || { echo "round $r: Dad's relay sync failed:" >&2; cat "$D/down.json" >&2; exit 1; }; t2=$(now_ms)
    stop_pid "$RELAY_PID"
    up+=($((t1 - t0))); down+=($((t2 - t1b))); relay+=($((t1 - t0 + t2 - t1b)))
    db=$("$KL" --home "$D/b" digest)
    [ "$da" = "$db" ] || { echo "round $r: the relay sync left the replicas different" >&2; exit 1; }
    say "round $r: direct ${direct[-1]} ms; relay ${relay[-1]} ms (upload ${up[-1]}, download ${down[-1]}); relay stored $bytes bytes"
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
md=$(median "${direct[@]}"); mr=$(median "${relay[@]}"); mu=$(median "${up[@]}"); mdn=$(median "${down[@]}"); mb=$(median "${perTxn[@]}")
if [ "${RELAY_BENCH_JSON:-}" = 1 ]; then
    # The row Scripts/bench.sh records (Scripts/bench-report.py reads it).
    echo "{\"row\":\"relay\",\"n\":$N,\"rounds\":$ROUNDS,\"directMillis\":$md,\"relayMillis\":$mr,\"uploadMillis\":$mu,\"downloadMillis\":$mdn,\"relayBytesPerTransaction\":$mb}"
else
    echo "N=$N rounds=$ROUNDS direct_ms=$md relay_ms=$mr upload_ms=$mu download_ms=$mdn relay_over_direct=$(python3 -c "print(f'{$mr/$md:.2f}')") download_over_direct=$(python3 -c "print(f'{$mdn/$md:.2f}')") relay_file_bytes_per_txn=$mb"
fi
