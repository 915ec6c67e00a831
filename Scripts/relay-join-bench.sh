#!/bin/bash
# A join through the relay (docs/RELAY-DESIGN.md, "Joining through the relay") of a household with
# N transactions, on 127.0.0.1 with release binaries: Mom holds N transactions (appended through
# the store API, as Scripts/relay-bench.sh does) and has uploaded them to the relay; her invitation
# names a dead address, so Gran's `join` goes through the relay; Mom runs `relay sync` once a
# second (as her daemon would every 30 s) until Gran's join ends. Prints Gran's join time, the
# time from the `relay sync` that let her in to the end of her join, and checks both digests agree.
# Usage: Scripts/relay-join-bench.sh [N]   (default 100000)
# Builds the release kidledger and kidledger-bench first, so they are current (Scripts/lib/release-binaries.sh);
# KL=PATH BENCH=PATH use others.
set -euo pipefail
N=${1:-100000}
. "$(dirname "$0")/lib/release-binaries.sh"
D=$(mktemp -d /tmp/relay-join-bench-XXXXXX)
export HOME="$D" TZ=UTC LC_ALL=C
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$D"; }
trap cleanup EXIT
say() { echo "relay-join-bench: $*" >&2; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
wait_for() { local i=0; while ! grep -qs "$2" "$1" && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done; grep -qs "$2" "$1"; }

RELAY_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$KL" --home "$D/relay" relay serve --listen "127.0.0.1:$RELAY_PORT" >"$D/relay.out" 2>"$D/relay.err" & PIDS+=($!)
wait_for "$D/relay.err" "relay serving on" || { cat "$D/relay.err" >&2; exit 1; }
wait_for "$D/relay/relay-code.txt" "KLR1-"
"$KL" --home "$D/a" init "Bench family" >/dev/null
for i in $(seq 1 10); do "$KL" --home "$D/a" child add "Kid$i" >/dev/null; done
"$KL" --home "$D/a" relay add "$(cat "$D/relay/relay-code.txt")" >/dev/null
"$BENCH" append --store "$D/a/ledger" --count "$N" >/dev/null
t0=$(now_ms); "$KL" --home "$D/a" relay sync >/dev/null; t1=$(now_ms)
say "Mom holds $N transactions; her upload to the relay took $((t1 - t0)) ms"
# 127.0.0.1:1 answers nothing: the join goes through the relay.
INVITE=$("$KL" --home "$D/a" --json invite --no-qr --address 127.0.0.1:1 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["code"])')
"$KL" --home "$D/a" relay sync >/dev/null   # the access list now names the invitation's guest key
t0=$(now_ms)
"$KL" --home "$D/g" --json join "$INVITE" --name Gran --wait 300 >"$D/join.json" 2>"$D/join.err" & JOIN=$!; PIDS+=($JOIN)
admitted=""
for _ in $(seq 1 300); do
    kill -0 "$JOIN" 2>/dev/null || break
    sleep 1
    "$KL" --home "$D/a" --json relay sync >"$D/sync.json" 2>&1 || true
    if [ -z "$admitted" ] && [ "$("$KL" --home "$D/a" --json members | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["members"]))')" = 2 ]; then
        admitted=$(now_ms)
    fi
done
wait "$JOIN" || { echo "Gran's join failed:" >&2; cat "$D/join.err" "$D/join.json" >&2; exit 1; }
t1=$(now_ms)
[ "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["via"])' "$D/join.json")" = relay ] || { echo "the join did not go through the relay" >&2; exit 1; }
"$KL" --home "$D/a" relay sync >/dev/null
"$KL" --home "$D/g" relay sync >/dev/null
da=$("$KL" --home "$D/a" digest); dg=$("$KL" --home "$D/g" digest)
[ "$da" = "$dg" ] || { echo "the digests differ after the join" >&2; exit 1; }
echo "N=$N join_ms=$((t1 - t0)) after_admission_ms=$((t1 - ${admitted:-$t1})) digests_agree=1"
