#!/usr/bin/env bash
# Scripts/campaign.sh in chunks: the same fuzz jobs (each seed run twice, JOBS jobs side by side),
# but the seeds go in chunks and each chunk's summary and failures are printed as soon as it ends,
# so a campaign stopped early still says how far it got. Uses the release kidledger-sim as built
# (run Scripts/campaign.sh once, or `swift build -c release --product kidledger-sim`, first).
#
#   Scripts/campaign-chunks.sh SEEDS START [CHUNK] [FUZZ FLAGS...]   e.g. JOBS=2 Scripts/campaign-chunks.sh 2000 3900000 250 --hostile
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: Scripts/campaign-chunks.sh SEEDS START [CHUNK] [FUZZ FLAGS...]" >&2; exit 64; }
seeds=$1
start=$2
chunk=${3:-250}
shift $(( $# < 3 ? $# : 3 ))
sim="$(swift build -c release --show-bin-path)/kidledger-sim"
[ -x "$sim" ] || { echo "no release kidledger-sim at $sim: build it first" >&2; exit 69; }
jobs=${JOBS:-$(nproc)}
out=$(mktemp -d /tmp/kidledger-campaign-chunks.XXXXXX)
trap 'rm -rf "$out"' EXIT
echo "campaign: $seeds seeds from $start on $jobs jobs in chunks of $chunk $*"
total=0; failures=0
for (( from = start; from < start + seeds; from += chunk )); do
    n=$(( from + chunk > start + seeds ? start + seeds - from : chunk ))
    per=$(( (n + jobs - 1) / jobs ))
    for j in $(seq 0 $((jobs - 1))); do
        s=$(( from + j * per ))
        k=$(( j == jobs - 1 ? n - j * per : per ))
        [ "$k" -gt 0 ] || continue
        "$sim" fuzz --seeds "$k" --start "$s" "$@" > "$out/job$j.txt" 2>&1 &
    done
    wait || true
    line=$(cat "$out"/job*.txt | grep -E "^seeds=" | awk -F'[ =]' '{s+=$2; f+=$4; e+=$6} END {printf "%d %d %d", s, f, e}')
    read -r s f e <<< "$line"
    total=$(( total + s )); failures=$(( failures + f ))
    echo "chunk $from...$(( from + n - 1 )): $s seeds, $f failures, $e events ($(date -u +%H:%M:%S) UTC)"
    cat "$out"/job*.txt | grep -E "FAILED|reproduce" || true
    rm -f "$out"/job*.txt
done
echo "campaign: $total seeds, $failures failures"
[ "$failures" -eq 0 ]
