#!/usr/bin/env bash
# A long fuzzed-convergence campaign: random seeds through the simulator (release build), each
# run twice to check determinism. Prints every failing seed with the command that reproduces it.
#
#   Scripts/campaign.sh [SEEDS] [START] [FUZZ FLAGS...]   default: 2000 seeds from a random start
#   e.g. JOBS=2 Scripts/campaign.sh 2000 1 --hostile      (JOBS defaults to every core)
set -euo pipefail
cd "$(dirname "$0")/.."
Scripts/setup.sh
seeds="${1:-2000}"
start="${2:-$(( (RANDOM << 30 | RANDOM << 15 | RANDOM) + 1 ))}"
shift $(( $# < 2 ? $# : 2 ))
swift build -c release --product kidledger-sim 2>&1 | tail -n 1
sim="$(swift build -c release --show-bin-path)/kidledger-sim"
jobs=${JOBS:-$(nproc)}
per=$(( (seeds + jobs - 1) / jobs ))
echo "campaign: $seeds seeds from $start on $jobs jobs $*"
out=$(mktemp -d /tmp/kidledger-campaign.XXXXXX)
trap 'rm -rf "$out"' EXIT
for j in $(seq 0 $((jobs - 1))); do
  s=$(( start + j * per ))
  n=$(( j == jobs - 1 ? seeds - j * per : per ))
  [ "$n" -gt 0 ] || continue
  "$sim" fuzz --seeds "$n" --start "$s" "$@" > "$out/job$j.txt" 2>&1 &
done
status=0
wait || status=$?
cat "$out"/job*.txt | grep -E "FAILED|reproduce" || true
cat "$out"/job*.txt | grep -E "^seeds=" | awk -F'[ =]' '{s+=$2; f+=$4; e+=$6} END {printf "campaign: %d seeds, %d failures, %d events\n", s, f, e}'
grep -h "faults injected" "$out"/job*.txt | head -n 1
exit $status
