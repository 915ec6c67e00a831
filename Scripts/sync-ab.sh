#!/usr/bin/env bash
# The initial sync of docs/PERFORMANCE.md (home A, the owner's with 10 children, holding N
# appended transactions; home B joined while A was empty; `kidledger --json sync` on B against A's
# daemon over loopback), measured for two builds side by side: rounds alternate the builds, so a
# shared machine's drift falls on both alike. Prints each run and the medians.
#
#   Scripts/sync-ab.sh BIN_A BIN_B [N] [ROUNDS]
#
# BIN_A and BIN_B are release bin directories holding `kidledger` and `kidledger-bench` (e.g. the
# `.build/release` of two worktrees). N defaults to 100000, ROUNDS to 5. Loopback only.
set -euo pipefail
main() {
[ $# -ge 2 ] || { echo "usage: Scripts/sync-ab.sh BIN_A BIN_B [N] [ROUNDS]" >&2; exit 64; }
BINS=("$1" "$2")
N=${3:-100000}
ROUNDS=${4:-5}
WORK=$(mktemp -d /tmp/kidledger-sync-ab.XXXXXX)
DAEMON_PID=""
trap 'stop_daemon; rm -rf "$WORK"' EXIT
say() { echo "[$(date +%H:%M:%S)] $*" >&2; }
# start_daemon_of KIDLEDGER HOME: sets DAEMON_PID and PORT
# shellcheck source=Scripts/lib/daemon.sh
. "$(dirname "$0")/lib/daemon.sh"
stop_daemon() {
    if [ -n "$DAEMON_PID" ]; then kill -TERM "$DAEMON_PID" 2>/dev/null || true; wait "$DAEMON_PID" 2>/dev/null || true; fi
    DAEMON_PID=""
}
# Homes per build: A with N transactions appended through the store API (kidledger-bench append),
# B just joined.
for i in 0 1; do
    KL=${BINS[$i]}/kidledger
    D=$WORK/b$i
    "$KL" --home "$D/a" init "Bench family" >/dev/null
    for k in $(seq 1 10); do "$KL" --home "$D/a" child add "Kid$k" >/dev/null; done
    start_daemon_of "$KL" "$D/a"
    CODE=$("$KL" --home "$D/a" --json invite --address "127.0.0.1:$PORT" | python3 -c 'import json,sys; print(json.load(sys.stdin)["code"])')
    "$KL" --home "$D/b" join "$CODE" >/dev/null
    stop_daemon
    "${BINS[$i]}/kidledger-bench" append --store "$D/a/ledger" --count "$N" >/dev/null
    cp -a "$D/b" "$D/b0"
done
: > "$WORK/runs.tsv"
for r in $(seq 1 "$ROUNDS"); do
    # Alternate which build goes first from round to round.
    order="0 1"; [ $(( r % 2 )) -eq 0 ] && order="1 0"
    for i in $order; do
        KL=${BINS[$i]}/kidledger
        D=$WORK/b$i
        rm -rf "$D/b"; cp -a "$D/b0" "$D/b"
        sync
        start_daemon_of "$KL" "$D/a"
        proc=$("${BINS[$i]}/kidledger-bench" run --runs 1 --out "$WORK/sync.json" -- "$KL" --home "$D/b" --json sync "127.0.0.1:$PORT")
        stop_daemon
        line=$(python3 - "$proc" "$WORK/sync.json" <<'EOF'
import json, sys
proc = json.loads(sys.argv[1])
session = json.load(open(sys.argv[2]))
def find(d, *names):
    for n in names:
        if isinstance(d, dict) and n in d: return d[n]
    return None
wall = find(proc, "median")
results = session.get("results", [{}]) if isinstance(session, dict) else [{}]
micros = results[0].get("micros") if results else None
print(f"{wall}\t{micros / 1e6 if micros else None}")
EOF
)
        printf '%s\t%s\t%s\n' "$i" "$r" "$line" >> "$WORK/runs.tsv"
        say "build $i (${BINS[$i]}) round $r: process s, session s = $line"
    done
    da=$("${BINS[0]}/kidledger" --home "$WORK/b0/b" digest); db=$("${BINS[0]}/kidledger" --home "$WORK/b0/a" digest)
    [ "$da" = "$db" ] || { echo "build 0's replicas disagree after the sync" >&2; exit 1; }
done
python3 - "$WORK/runs.tsv" "${BINS[0]}" "${BINS[1]}" "$N" <<'EOF'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
for i, name in enumerate(sys.argv[2:4]):
    proc = [float(r[2]) for r in rows if r[0] == str(i) and r[2] != "None"]
    sess = [float(r[3]) for r in rows if r[0] == str(i) and r[3] != "None"]
    print(f"{name}: initial sync of {sys.argv[4]}: process median {statistics.median(proc):.3f} s {sorted(proc)}; "
          f"session median {statistics.median(sess):.3f} s {sorted(sess)}")
EOF
}
main "$@"
