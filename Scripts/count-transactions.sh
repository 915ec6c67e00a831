#!/usr/bin/env bash
# Counts the LMDB transactions one `kidledger give` opens: read-only ones and write ones, by
# breakpoints on liblmdb's mdb_txn_begin under gdb (no hook in the product), and those of a
# `balance` for comparison. Opening the environment itself takes one write (its tables' handles).
#
#   Scripts/count-transactions.sh [KIDLEDGER]   # default: .build/release/kidledger
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(realpath "${1:-.build/release/kidledger}")
command -v gdb > /dev/null || { echo "needs gdb" >&2; exit 69; }
home=$(mktemp -d /tmp/count-transactions.XXXXXX)
trap 'rm -rf "$home"' EXIT
export KIDLEDGER_HOME=$home TZ=UTC
"$bin" init Home > /dev/null
"$bin" child add Ava > /dev/null
"$bin" give Ava 1 > /dev/null

cat > "$home/gdb" <<'GDB'
set pagination off
set breakpoint pending on
break mdb_txn_begin if ($rdx & 0x20000) != 0
commands
silent
continue
end
break mdb_txn_begin if ($rdx & 0x20000) == 0
commands
silent
continue
end
run
info breakpoints
GDB

# Prints "READS WRITES" for one run of the binary with the arguments given.
count() {
    gdb -q -batch -nx -x "$home/gdb" --args "$bin" "$@" 2> /dev/null |
        awk '/^[12] +breakpoint/ { n = $1 } /already hit/ { hits[n] = $4 } END { printf "%d %d\n", hits[1], hits[2] }'
}

read -r reads writes < <(count give Ava 1)
echo "give:    $reads read, $writes write transactions"
read -r reads writes < <(count balance)
echo "balance: $reads read, $writes write transactions"
