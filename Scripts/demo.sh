#!/usr/bin/env bash
# A short local demo: creates a household with two children in a temporary home, records a few
# transactions and an undo, and prints balances and history. Leaves nothing behind.
set -euo pipefail
cd "$(dirname "$0")/.."
Scripts/setup.sh
swift build -c release --product kidledger 2>&1 | tail -n 1
bin="$(swift build -c release --show-bin-path)/kidledger"
home="$(mktemp -d /tmp/kidledger-demo.XXXXXX)"
trap 'rm -rf "$home"' EXIT
export KIDLEDGER_HOME="$home"

run() { echo "$ kidledger $(printf "%q " "$@")"; "$bin" "$@"; echo; }
run init "The Smiths"
run child add Ava
run child add Ben
run give Ava 5 --note "weekly allowance"
run give Ben quarter
run give-all 1.50 --note "chores"
run take Ava '$0.75' --note "ice cream"
run undo
run children
run history
run verify
echo "(a bad amount is refused with exit 65 and changes nothing)"
echo "\$ kidledger give Ava 1.005"
"$bin" give Ava 1.005 || echo "exit code $?"
echo
run balance
