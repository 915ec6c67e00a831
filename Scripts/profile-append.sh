#!/usr/bin/env bash
# Scripts/profile-append.sh BUILD_DIR OUT [COUNT]: callgrind instruction profile of appending COUNT
# (default 10000) transactions through the store API (kidledger-bench append) into a fresh owned
# home made with BUILD_DIR's kidledger. Compare two builds' OUT files with callgrind_annotate.
set -euo pipefail
BIN=$1; OUT=$2; N=${3:-10000}
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
"$BIN/kidledger" --home "$D/a" init "Profile family" >/dev/null
for i in $(seq 1 10); do "$BIN/kidledger" --home "$D/a" child add "Kid$i" >/dev/null; done
valgrind --tool=callgrind --callgrind-out-file="$OUT" "$BIN/kidledger-bench" append --store "$D/a/ledger" --count "$N" 2>&1 | grep -E "Collected" || true
