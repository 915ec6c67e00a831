#!/usr/bin/env bash
# Makes a fixture home pair for the migration tests (issue 43): the stores a released kidledger
# wrote, committed under Tests/Fixtures/homes/NAME, which every later version must open.
#
#   Scripts/make-fixture.sh COMMIT NAME              builds COMMIT in a temporary git worktree
#                                                    (debug, the kidledger product only), then runs it
#   Scripts/make-fixture.sh COMMIT NAME --binary BIN uses BIN, already built from COMMIT
#
# The pair: Mom's laptop (owner) and Dad's (member), both homes; Max added on Mom's laptop and
# max on Dad's while apart (two same-name children), then synced and merged (max into Max);
# Ava with a weekly allowance; a give undone. Each home keeps its keys (identities/, account)
# and a compact copy of its store (mdb_copy -c: only the pages in use). Beside them, fixture.json
# records the commit, the schema and protocol versions that wrote it, the time it was made
# (a test sets its clock there, so the allowance pays no later period) and the expected
# state: balances, children, members, allowances, the merge, each home's digest.
# Everything runs on 127.0.0.1 and stops the daemons it started, by pid.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: Scripts/make-fixture.sh COMMIT NAME [--binary BIN]" >&2; exit 64; }
commit="$(git rev-parse --verify "$1^{commit}")" name="$2"
bin=""
[ "${3:-}" = "--binary" ] && bin="${4:?--binary needs a path}"
command -v mdb_copy >/dev/null || apt-get install -y -qq lmdb-utils >/dev/null
out="Tests/Fixtures/homes/$name"
[ -e "$out" ] && { echo "$out exists; remove it first" >&2; exit 73; }
work="$(mktemp -d /tmp/kidledger-fixture.XXXXXX)"
tree="$work/tree"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ -d "$tree" ] && git worktree remove --force "$tree" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
if [ -z "$bin" ]; then
  git worktree add --detach "$tree" "$commit" >/dev/null
  (cd "$tree" && swift build --product kidledger 2>&1 | tail -n 1)
  bin="$(cd "$tree" && swift build --show-bin-path)/kidledger"
fi
mom="$work/mom" dad="$work/dad"
export KIDLEDGER_MAP_SIZE_MAX=$((64 << 20))
m() { "$bin" --home "$mom" "$@"; }
d() { "$bin" --home "$dad" "$@"; }
serve() { # HOME LOG: starts a daemon on a free loopback port (the page on another), sets $port
  : >"$2"
  "$bin" --home "$1" serve --listen 127.0.0.1:0 --ui 127.0.0.1:0 --no-discovery >/dev/null 2>"$2" & pids+=($!)
  for _ in $(seq 1 100); do grep -q "serving" "$2" 2>/dev/null && break; sleep 0.1; done
  port="$(grep -o 'on 127\.0\.0\.1:[0-9]*' "$2" | head -n 1 | cut -d: -f2)"
  [ -n "$port" ] || { echo "the daemon did not start: $(cat "$2")" >&2; exit 70; }
}
stop_daemons() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; pids=(); }

made="$(date +%s%3N)"
m init "The Fixtures" --account mom --name "Mom" >/dev/null
m child add Ava >/dev/null
m give Ava 5 --note "birthday" >/dev/null
m give Ava 0.10 --note "a mistake" >/dev/null
m undo >/dev/null
m allowance set Ava 2 --every week >/dev/null
serve "$mom" "$work/mom.log"
code="$(m invite --address "127.0.0.1:$port" | grep -o 'KL1-[A-Za-z0-9_-]*')"
mkdir -p "$dad"
d join "$code" --name "Dad" >/dev/null
stop_daemons
# Apart: each laptop adds the same child.
m child add Max >/dev/null
m give Max 1.25 --note "chores" >/dev/null
d child add max >/dev/null
d give max 2 --note "from dad" >/dev/null
serve "$mom" "$work/mom.log"
d sync "127.0.0.1:$port" >/dev/null
d child merge "$(d --json children | python3 -c 'import json,sys; print([c["id"] for c in json.load(sys.stdin)["children"] if c["name"]=="max"][0])')" Max >/dev/null
d sync "127.0.0.1:$port" >/dev/null
stop_daemons
[ "$(m digest)" = "$(d digest)" ] || { echo "the two homes did not converge" >&2; exit 70; }

mkdir -p "$out"
for who in mom dad; do
  home="$work/$who"
  mkdir -p "$out/$who/ledger"
  mdb_copy -c "$home/ledger" "$out/$who/ledger"
  cp -a "$home/identities" "$out/$who/"
  [ -f "$home/account" ] && cp "$home/account" "$out/$who/"
  true
done
# The versions that commit wrote and spoke, from its sources.
# The schema: a constant in Replica.swift before issue 43, then the newest step of Migrations.swift.
schema="$(git show "$commit:Sources/KidLedgerReplica/Replica.swift" | grep -o 'schemaVersion: UInt64 = [0-9]*' | grep -o '[0-9]*$' || true)"
[ -n "$schema" ] || schema="$(git show "$commit:Sources/KidLedgerReplica/Store/Migrations.swift" | grep -o 'Migration(to: [0-9]*' | grep -o '[0-9]*$' | sort -n | tail -n 1)"
[ -n "$schema" ] || { echo "no schema version found in $commit's sources" >&2; exit 70; }
protocol_min="$(git show "$commit:Sources/KidLedgerProtocol/Message.swift" | grep -o 'protocolVersionMin: UInt16 = [0-9]*' | grep -o '[0-9]*$')"
protocol_max="$(git show "$commit:Sources/KidLedgerProtocol/Message.swift" | grep -o 'protocolVersionMax: UInt16 = [0-9]*' | grep -o '[0-9]*$')"
python3 - "$out/fixture.json" "$commit" "$made" "$bin" "$mom" "$dad" "$schema" "$protocol_min" "$protocol_max" <<'EOF'
import json, subprocess, sys
path, commit, made, binary, mom, dad, schema, pmin, pmax = sys.argv[1:]
def j(home, *args):
    return json.loads(subprocess.run([binary, "--home", home, "--json", *args], check=True, capture_output=True, text=True).stdout)
def text(home, *args):
    return subprocess.run([binary, "--home", home, *args], check=True, capture_output=True, text=True).stdout.strip()
children = j(mom, "children", "--all")["children"]
doc = {
    "commit": commit,
    "madeAtMillis": int(made),
    "schemaVersion": int(schema),
    "protocolVersions": [int(pmin), int(pmax)],
    "digest": text(mom, "digest"),
    "children": [{k: c.get(k) for k in ("id", "name", "balanceCents", "mergedInto", "archived")} for c in children],
    "members": sorted([m.get("name"), m.get("owner")] for m in j(mom, "members")["members"]),
    "allowances": [{k: a.get(k) for k in ("childName", "amountCents", "every", "on", "nextPaymentAtMillis")} for a in j(mom, "allowance", "list")["schedules"]],
    "transactionCount": len(j(mom, "history", "--limit", "1000")["transactions"]),
}
with open(path, "w") as f:
    json.dump(doc, f, indent=2, sort_keys=True)
    f.write("\n")
EOF
du -sh "$out"
echo "fixture written to $out"
