#!/usr/bin/env bash
# `kidledger give` of two builds side by side (hyperfine, alternating by its own interleaving of
# the two commands), each on a home of its own holding N appended transactions: what a change
# to the product's local write path costs a user's command.
#
#   Scripts/give-ab.sh BIN_A BIN_B [N] [RUNS]
#
# BIN_A and BIN_B are release bin directories holding `kidledger` and `kidledger-bench`. N
# defaults to 10000, RUNS (per build) to 40.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: Scripts/give-ab.sh BIN_A BIN_B [N] [RUNS]" >&2; exit 64; }
A=$1 B=$2 N=${3:-10000} RUNS=${4:-40}
WORK=$(mktemp -d /tmp/kidledger-give-ab.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
for bin in "$A" "$B"; do
    home="$WORK/$(echo "$bin" | tr '/' '_')"
    "$bin/kidledger" --home "$home" init "Bench family" >/dev/null
    "$bin/kidledger" --home "$home" child add Kid1 >/dev/null
    "$bin/kidledger-bench" append --store "$home/ledger" --count "$N" >/dev/null
done
hA="$WORK/$(echo "$A" | tr '/' '_')" hB="$WORK/$(echo "$B" | tr '/' '_')"
hyperfine --warmup 3 --runs "$RUNS" -N \
    -n "A $A" "$A/kidledger --home $hA give Kid1 1.25 --note bench" \
    -n "B $B" "$B/kidledger --home $hB give Kid1 1.25 --note bench"
