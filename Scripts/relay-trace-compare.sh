#!/usr/bin/env bash
# Compares what two kidledger-sim binaries do with relays: `seed N --relays --trace` and
# `seed N --relays --membership --hostile --trace` for seeds 1...SEEDS (default 40). The
# trace-baseline.sh variants run no relay; the scenarios with relays (15, 31, 32) are in it.
#
#   Scripts/relay-trace-compare.sh OLD-SIM NEW-SIM    # exit 0 when every trace is identical
set -uo pipefail
old=${1:-}; new=${2:-}
if [[ -z "$old" || -z "$new" ]]; then sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 64; fi
seeds=${SEEDS:-40}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for which in old new; do
    sim=$old; [[ $which == new ]] && sim=$new
    mkdir -p "$dir/$which"
    for ((s = 1; s <= seeds; s++)); do
        "$sim" seed "$s" --relays --trace > "$dir/$which/relays-$s.txt" 2>&1 || echo "exit $?" >> "$dir/$which/relays-$s.txt"
        "$sim" seed "$s" --relays --membership --hostile --trace > "$dir/$which/relaysmh-$s.txt" 2>&1 || echo "exit $?" >> "$dir/$which/relaysmh-$s.txt"
    done
done
if diff -r -q "$dir/old" "$dir/new"; then echo "identical: $((2 * seeds)) relay traces"; else echo "relay traces differ" >&2; exit 1; fi
