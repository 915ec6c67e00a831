#!/usr/bin/env bash
# Two laptops on one machine: two homes, two daemons. Both change the ledger while the link is
# down, then the link comes up and both ledgers converge.
#
#   Scripts/two-laptops.sh            loopback ports on 127.0.0.1 ("down" = daemons stopped)
#   Scripts/two-laptops.sh --netns    (root) each laptop in its own network namespace joined by a
#                                     veth pair; Dad joins with the short code, the daemons find
#                                     each other by LAN discovery (no `peer add`); the link is cut
#                                     with `ip link set down`
#   KIDLEDGER_BIN=/usr/bin/kidledger Scripts/two-laptops.sh
#                                     with that binary instead of a release build of this checkout
set -euo pipefail
cd "$(dirname "$0")/.."
netns=false
[ "${1:-}" = "--netns" ] && netns=true
if [ -n "${KIDLEDGER_BIN:-}" ]; then
  # A kidledger already built or installed (Scripts/package-check.sh: /usr/bin/kidledger).
  bin="$KIDLEDGER_BIN"
  [ -x "$bin" ] || { echo "two-laptops: KIDLEDGER_BIN=$bin is not an executable" >&2; exit 64; }
else
  Scripts/setup.sh
  swift build -c release --product kidledger 2>&1 | tail -n 1
  bin="$(swift build -c release --show-bin-path)/kidledger"
fi
work="$(mktemp -d /tmp/kidledger-two-laptops.XXXXXX)"
mom="$work/mom" dad="$work/dad"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if $netns; then ip netns del kl-mom 2>/dev/null || true; ip netns del kl-dad 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

say() { printf '\n\033[1m%s\033[0m\n' "$*"; }
if $netns; then
  [ "$(id -u)" -eq 0 ] || { echo "--netns needs root" >&2; exit 1; }
  command -v ip >/dev/null || apt-get install -y -qq iproute2 >/dev/null
  # What a killed earlier run left behind (namespaces, or a veth not yet moved out of the root
  # namespace) is removed first, so this run starts clean instead of failing on "File exists".
  for ns in kl-mom kl-dad; do ip netns del "$ns" 2>/dev/null || true; done
  for link in kl-veth-mom kl-veth-dad; do ip link del "$link" 2>/dev/null || true; done
  ip netns add kl-mom; ip netns add kl-dad
  ip link add kl-veth-mom type veth peer name kl-veth-dad
  ip link set kl-veth-mom netns kl-mom; ip link set kl-veth-dad netns kl-dad
  ip -n kl-mom addr add 10.77.0.1/24 dev kl-veth-mom; ip -n kl-dad addr add 10.77.0.2/24 dev kl-veth-dad
  for ns in kl-mom kl-dad; do ip -n $ns link set lo up; done
  ip -n kl-mom link set kl-veth-mom up; ip -n kl-dad link set kl-veth-dad up
  mom_run() { ip netns exec kl-mom "$bin" --home "$mom" "$@"; }
  dad_run() { ip netns exec kl-dad "$bin" --home "$dad" "$@"; }
  mom_addr=10.77.0.1:4717 dad_addr=10.77.0.2:4717
  link_down() { ip -n kl-mom link set kl-veth-mom down; }
  link_up() { ip -n kl-mom link set kl-veth-mom up; }
else
  mom_run() { "$bin" --home "$mom" "$@"; }
  dad_run() { "$bin" --home "$dad" "$@"; }
  # Free ports: let the system pick one for each daemon once, then keep it across restarts.
  free_port() {
    local home="$1" log="$work/probe.log"
    "$bin" --home "$home" serve --listen 127.0.0.1:0 2>"$log" & local pid=$!
    for _ in $(seq 1 50); do grep -q "serving" "$log" 2>/dev/null && break; sleep 0.1; done
    kill "$pid"; wait "$pid" 2>/dev/null || true
    grep -o '127\.0\.0\.1:[0-9]*' "$log" | head -n 1 | cut -d: -f2
  }
  link_down() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; pids=(); }
  link_up() { start_daemons; }
fi
start_daemons() {
  if $netns; then
    ip netns exec kl-mom "$bin" --home "$mom" serve --listen :4717 2>>"$work/mom.log" & pids+=($!)
    ip netns exec kl-dad "$bin" --home "$dad" serve --listen :4717 2>>"$work/dad.log" & pids+=($!)
  else
    "$bin" --home "$mom" serve --listen "$mom_addr" 2>>"$work/mom.log" & pids+=($!)
    "$bin" --home "$dad" serve --listen "$dad_addr" 2>>"$work/dad.log" & pids+=($!)
  fi
  sleep 1
}

say "Mom's laptop: a household, two children"
mom_run init "The Smiths"
mom_run child add Ava
mom_run child add Ben
mom_run give Ava 5 --note "allowance"
if ! $netns; then
  mom_addr=127.0.0.1:$(free_port "$mom")
fi
mkdir -p "$dad"
if $netns; then ip netns exec kl-mom "$bin" --home "$mom" serve --listen :4717 2>>"$work/mom.log" & pids+=($!); sleep 1
else "$bin" --home "$mom" serve --listen "$mom_addr" 2>>"$work/mom.log" & pids+=($!); sleep 1; fi
if $netns; then
  say "Mom invites Dad's laptop; Dad types the short code (his laptop finds Mom's daemon on the network)"
  short=$(mom_run invite | grep -o '[0-9A-Z]\{4\}-[0-9A-Z]\{4\}-[0-9A-Z]\{4\}' | head -n 1)
  echo "the short code: $short"
  dad_run join "$short"
else
  # Loopback daemons announce nowhere: the long code carries the address.
  say "Mom invites Dad's laptop; Dad joins with the long code"
  code=$(mom_run invite --address "$mom_addr" | grep -o 'KL1-[A-Za-z0-9_-]*')
  dad_run join "$code"
fi
if ! $netns; then
  dad_addr=127.0.0.1:$(free_port "$dad")
fi
if $netns; then
  ip netns exec kl-dad "$bin" --home "$dad" serve --listen :4717 2>>"$work/dad.log" & pids+=($!)
  say "Nobody types Dad's address: Mom's daemon finds Dad's by its LAN announcement"
  # Only an announcement Mom's daemon opened logs "discovery: found member" (an address learned
  # from Dad's session logs "learned from its session"), and `peers` says how each was learned.
  for _ in $(seq 1 100); do grep -q "discovery: found member" "$work/mom.log" 2>/dev/null && break; sleep 0.2; done
  grep "discovery: found member" "$work/mom.log" | head -n 1 | cut -d' ' -f2- \
    || { echo "Mom's daemon did not find Dad's by its announcement within 20 s" >&2; cat "$work/mom.log" >&2; exit 1; }
  mom_run peers
else
  # Loopback daemons announce nowhere (docs/SYNC.md): Mom adds Dad's daemon by hand.
  mom_run peer add "$dad_addr"
  "$bin" --home "$dad" serve --listen "$dad_addr" 2>>"$work/dad.log" & pids+=($!)
fi
sleep 1
link_down
say "The link is down. Both change the ledger"
mom_run give Ava 1 --note "chores (mom)"
mom_run child rename Ben Benjamin
dad_run give Ben 2 --note "chores (dad)"
dad_run child rename Ben Benny
dad_run undo
mom_run status || true
say "The link comes back up; the daemons sync"
link_up
for i in $(seq 1 40); do
  [ "$(mom_run digest)" = "$(dad_run digest)" ] && break
  sleep 0.5
done
say "Mom's laptop";  mom_run children
say "Dad's laptop";  dad_run children
say "Conflicts";     mom_run conflicts
m=$(mom_run digest); d=$(dad_run digest)
echo; echo "mom digest $m"; echo "dad digest $d"
if [ "$m" = "$d" ]; then say "Both laptops hold the same ledger."; else say "The laptops differ!"; echo "--- mom log"; cat "$work/mom.log"; echo "--- dad log"; cat "$work/dad.log"; exit 1; fi
