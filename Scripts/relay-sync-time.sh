#!/bin/sh
# Times a relay sync of N imported transactions (a change per 1,000) on 127.0.0.1: Mom uploads them
# (`relay sync`), Dad downloads them (`relay sync`); prints both times and the relay's
# store size. Usage: Scripts/relay-sync-time.sh [N] [KIDLEDGER_BINARY]. Starts one relay
# process (stopped by pid at the end) and runs Mom's daemon only for Dad's join.
set -eu
N=${1:-10000}
K=${2:-.build/release/kidledger}
D=$(mktemp -d /tmp/relay-time-XXXXXX)
export HOME="$D" TZ=UTC LC_ALL=C
RELAY_PID= MOM_PID=
cleanup() { [ -n "$RELAY_PID" ] && kill "$RELAY_PID" 2>/dev/null; [ -n "$MOM_PID" ] && kill "$MOM_PID" 2>/dev/null; rm -rf "$D"; }
trap cleanup EXIT
"$K" --home "$D/mom" init Smiths >/dev/null
"$K" --home "$D/mom" child add Ava >/dev/null
# Files of 1,000 rows: each import is one change (a change above 1 MiB can't go through the relay).
i=1; while [ $i -le "$N" ]; do
  [ $(( (i - 1) % 1000 )) -eq 0 ] && echo "createdAt,child,amountCents,note" > "$D/rows-$(( (i - 1) / 1000 )).csv"
  echo "@$((1790000000000 + i)),Ava,$i,row $i" >> "$D/rows-$(( (i - 1) / 1000 )).csv"; i=$((i + 1)); done
"$K" --home "$D/relay" relay serve --listen 127.0.0.1:0 >"$D/relay.out" 2>"$D/relay.err" & RELAY_PID=$!
i=0; while [ ! -s "$D/relay/relay-code.txt" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
"$K" --home "$D/mom" relay add "$(cat "$D/relay/relay-code.txt")" >/dev/null
"$K" --home "$D/mom" serve --listen 127.0.0.1:0 --ui off --no-discovery 2>"$D/mom.err" & MOM_PID=$!
i=0; while ! grep -qs serving "$D/mom.err" && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
INVITE=$("$K" --home "$D/mom" --json invite 2>/dev/null | sed 's/.*"code":"\([^"]*\)".*/\1/')
"$K" --home "$D/dad" join "$INVITE" --name Dad >/dev/null 2>&1
kill "$MOM_PID"; wait "$MOM_PID" 2>/dev/null || true; MOM_PID=
for f in "$D"/rows-*.csv; do "$K" --home "$D/mom" import --csv "$f" >/dev/null; done
start=$(date +%s%N); "$K" --home "$D/mom" relay sync | tail -1; end=$(date +%s%N)
echo "mom relay sync (upload $N transactions in $(( (N + 999) / 1000 )) import changes): $(( (end - start) / 1000000 )) ms"
start=$(date +%s%N); "$K" --home "$D/dad" relay sync | tail -1; end=$(date +%s%N)
echo "dad relay sync (download them): $(( (end - start) / 1000000 )) ms"
echo "relay store: $(du -k "$D/relay/relay/data.mdb" | cut -f1) KiB on disk"
[ "$("$K" --home "$D/mom" digest)" = "$("$K" --home "$D/dad" digest)" ] || { echo "digests differ" >&2; exit 1; }
echo "digests equal"
