#!/usr/bin/env bash
# Fuzz campaign of the simulator with a relay (docs/SIMULATOR.md, "Relays"): plain relays, relays
# with forced membership changes, and relays beside a hostile member, on a release build.
#
#   Scripts/relay-campaign.sh [SEEDS] [JOBS] [SIM]    # defaults: 300 seeds a batch, 2 jobs
#
# Prints each batch's summary line, its failures and its relay coverage counts; exit 1 when a batch failed.
set -uo pipefail
cd "$(dirname "$0")/.."
seeds=${1:-300} jobs=${2:-2} sim=${3:-.build/release/kidledger-sim}
if [[ ! -x "$sim" ]]; then swift build -c release --product kidledger-sim 2>&1 | tail -n 1; fi
status=0
for flags in "--relays" "--relays --membership" "--relays --hostile"; do
    # shellcheck disable=SC2086
    out=$("$sim" fuzz --seeds "$seeds" --jobs "$jobs" $flags 2>&1) || status=1
    echo "== fuzz $flags"
    grep -E "FAILED|^seeds=" <<< "$out"
    grep -E "^faults injected" <<< "$out" | tr ' ' '\n' | grep '^relay\.' | tr '\n' ' '
    echo
done
exit $status
