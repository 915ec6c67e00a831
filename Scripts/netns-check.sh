#!/usr/bin/env bash
# Two laptops on real network plumbing (issue 22, point 8): each in its own network namespace, both
# plugged by a veth pair into a bridge (the home router's switch) in a third namespace, at 10.79.0.1
# and 10.79.0.2, both daemons running as parents run them (`serve --listen :4717`, LAN discovery on).
#
#   1. Dad's laptop joins Mom's through her daemon with the short code (found by its broadcast
#      invitation announcement). Nobody runs `peer add`: Mom's daemon finds Dad's by its
#      announcements across the bridge (`peers --json` says the address was learned from an
#      announcement, not from Dad's session, and Mom's log says "discovery: found member"), and a
#      change on Dad's laptop reaches Mom's.
#   2. 12 % of the packets each side receives are dropped (iptables `statistic`; this kernel has no
#      netem): ten gives on Mom's laptop reach Dad's, and the digests agree.
#   3. A silent partition (every packet dropped, the links stay up): both laptops change the ledger
#      apart; the digests differ. The partition heals: the daemons converge on their own.
#   4. The router renumbers both laptops (10.79.0.11 and 10.79.0.12): they find each other at the new
#      addresses and sync again within a minute, nobody typing anything; status says synced.
#   5. IPv6 alone: the laptops lose their IPv4 addresses and every IPv4 packet is dropped; each has
#      only an IPv6 link-local address (fe80::79:1, fe80::79:2). The daemons (dual-stack, as
#      `--listen :4717` is) find each other by IPv6 multicast alone (ff12::4717), learn the
#      link-local addresses from announcements, and sync both ways. (When Dad's `join` typed
#      Mom's link-local address, heard first, that typed record is removed first: discovery
#      never "finds" a typed address.) Then Gran's laptop, plugged
#      into the same bridge with nothing but a link-local IPv6 address (fe80::79:3), joins with a
#      short code: its `join` hears the invitation's announcement by IPv6 multicast.
#
# Every wait is bounded; the namespaces, daemons and homes are removed at the end, whatever
# happens. Needs root, `ip` and `iptables`: elsewhere it exits 77 (a skip) with the reason on
# stderr. With KIDLEDGER_INSTALL_NETNS=1 (Scripts/test.sh sets it) it installs iproute2 and
# iptables when missing.
#
#   Scripts/netns-check.sh [KIDLEDGER]    default: the debug build (built when missing)
set -euo pipefail
cd "$(dirname "$0")/.."
NETNS_NAME=netns-check
. Scripts/lib/netns.sh
netns_require ip:iproute2 iptables:iptables ip6tables:iptables
bin=${1:-}
if [ -z "$bin" ]; then
  swift build --product kidledger 2>&1 | tail -n 1
  bin="$(swift build --show-bin-path)/kidledger"
fi

ns=(kl-check-mom kl-check-dad kl-check-gran)
lan=kl-check-lan
links=(kl-chk-mom kl-chk-dad kl-chk-gran)
ports=(kl-port-mom kl-port-dad kl-port-gran)
addr=(10.79.0.1 10.79.0.2)
addr6=(fe80::79:1 fe80::79:2 fe80::79:3)
work="$(mktemp -d /tmp/kidledger-netns.XXXXXX)"
home=("$work/mom" "$work/dad" "$work/gran")
pids=()
netns_create "$lan" "${ns[@]}" -- "${links[@]}" "${ports[@]}"
# A switch that floods multicast (no MLD snooping: nothing on this bridge answers MLD queries).
ip -n "$lan" link add br0 type bridge mcast_snooping 0
ip -n "$lan" link set br0 up
for i in 0 1 2; do
  ip link add "${links[$i]}" type veth peer name "${ports[$i]}"
  ip link set "${links[$i]}" netns "${ns[$i]}"
  ip link set "${ports[$i]}" netns "$lan"
  ip -n "$lan" link set "${ports[$i]}" master br0
  ip -n "$lan" link set "${ports[$i]}" up
  # Gran's laptop (the third) has no IPv4 address at all.
  if [ "$i" -lt 2 ]; then ip -n "${ns[$i]}" addr add "${addr[$i]}/24" dev "${links[$i]}"; fi
  # One fixed IPv6 link-local address, usable at once (no duplicate address detection wait), and
  # no address generated from the MAC beside it.
  ip -n "${ns[$i]}" link set "${links[$i]}" addrgenmode none
  ip -n "${ns[$i]}" -6 addr add "${addr6[$i]}/64" dev "${links[$i]}" nodad
  ip -n "${ns[$i]}" link set lo up
  ip -n "${ns[$i]}" link set "${links[$i]}" up
done

say() { printf 'netns-check: %s\n' "$*"; }
fail() { echo "netns-check: FAILED: $*" >&2; for i in 0 1 2; do echo "--- daemon $i log:" >&2; tail -n 20 "$work/daemon$i.log" >&2 || true; done; exit 1; }
kl() { local i=$1; shift; ip netns exec "${ns[$i]}" "$bin" --home "${home[$i]}" "$@"; }
digest() { "$bin" --home "${home[$1]}" digest; }
balance() { "$bin" --home "${home[$1]}" balance Ava --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["balanceCents"])'; }
serve() {
  local i=$1
  ip netns exec "${ns[$i]}" "$bin" --home "${home[$i]}" serve --listen :4717 --ui off 2>>"$work/daemon$i.log" & pids+=($!)
  for _ in $(seq 1 100); do grep -q serving "$work/daemon$i.log" 2>/dev/null && return; sleep 0.1; done
  fail "daemon $i did not start"
}
# Waits at most $1 seconds for both digests to agree.
converge() {
  local deadline=$(( $(date +%s) + $1 ))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    [ "$(digest 0)" = "$(digest 1)" ] && return 0
    sleep 0.5
  done
  return 1
}
# Both families: the daemons talk IPv4 and IPv6 (link-local) alike.
drop_all() {
  for i in 0 1; do for t in iptables ip6tables; do ip netns exec "${ns[$i]}" $t "$1" INPUT -i "${links[$i]}" -j DROP; done; done
}
loss() {
  for i in 0 1; do for t in iptables ip6tables; do
    ip netns exec "${ns[$i]}" $t "$1" INPUT -i "${links[$i]}" -m statistic --mode random --probability 0.12 -j DROP
  done; done
}

say "Mom's laptop (${addr[0]}) and Dad's (${addr[1]}), each in its own namespace"
kl 0 init "The Smiths" >/dev/null
kl 0 child add Ava >/dev/null
kl 0 give Ava '$5' --note allowance >/dev/null
serve 0
# Dad types the short code: his `join` finds Mom's daemon by its broadcast invitation announcement.
short=$(kl 0 invite 2>/dev/null | grep -o '[0-9A-Z]\{4\}-[0-9A-Z]\{4\}-[0-9A-Z]\{4\}' | head -n 1)
[ -n "$short" ] || fail "invite printed no short code"
mkdir -p "${home[1]}"
kl 1 join "$short" --wait 20 >/dev/null || fail "join with the short code $short did not find or join Mom's laptop"
serve 1
converge 30 || fail "the laptops did not agree after the join"
# Waits at most $1 seconds for home $2's peers to list an address matching the regular expression
# $3 as learned from an announcement (`learnedFrom`; one learned only from a session says
# "session", one typed "typed"), and for daemon $2's log to say that discovery found it.
discovered() {
  local deadline=$(( $(date +%s) + $1 ))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    if "$bin" --home "${home[$2]}" --json peers | python3 -c 'import json,re,sys; sys.exit(0 if any(p["learnedFrom"] == "announcement" and p["discovered"] and re.fullmatch(sys.argv[1], p["address"]) for p in json.load(sys.stdin)["peers"]) else 1)' "$3" \
       && grep -Eq "discovery: found member [0-9a-f-]+ at $3\$" "$work/daemon$2.log"; then
      return 0
    fi
    sleep 0.5
  done
  return 1
}
discovered 30 0 "${addr[1]//./\\.}:4717" || fail "Mom's daemon did not find Dad's by its announcements within 30 s"
say "Mom's daemon found Dad's at ${addr[1]}:4717 by its announcement (no peer add; learnedFrom: announcement)"
kl 1 give Ava '$0.25' --note "from dad" >/dev/null
converge 30 || fail "Dad's give did not reach Mom's laptop within 30 s"

say "12 % loss each way: ten gives on Mom's laptop reach Dad's"
loss -A
for n in $(seq 1 10); do kl 0 give Ava '$0.10' --note "loss $n" >/dev/null; done
converge 90 || fail "Dad's laptop did not get Mom's gives under 12 % loss within 90 s"
[ "$(balance 1)" = 625 ] || fail "Dad's laptop shows $(balance 1) cents, not 625"
loss -D

say "a silent partition: both change the ledger apart"
drop_all -A
kl 0 give Ava '$1' --note "mom, apart" >/dev/null
kl 1 take Ava '$0.50' --note "dad, apart" >/dev/null
sleep 3
[ "$(digest 0)" != "$(digest 1)" ] || fail "the digests agree across a partition"
drop_all -D
say "healed: the daemons converge on their own"
converge 120 || fail "the laptops did not converge within 120 s of the heal"
[ "$(balance 0)" = 675 ] && [ "$(balance 1)" = 675 ] || fail "balances $(balance 0) and $(balance 1), not 675"

say "the router renumbers both laptops: 10.79.0.11 and 10.79.0.12"
new=(10.79.0.11 10.79.0.12)
for i in 0 1; do
  ip -n "${ns[$i]}" addr flush dev "${links[$i]}" scope global
  ip -n "${ns[$i]}" addr add "${new[$i]}/24" dev "${links[$i]}"
done
started=$(date +%s)
kl 0 give Ava '$1' --note "mom, new address" >/dev/null
kl 1 give Ava '$2' --note "dad, new address" >/dev/null
converge 60 || fail "the laptops did not sync within 60 s of both addresses changing"
say "synced again $(( $(date +%s) - started )) s after the change"
discovered 25 1 "${new[0]//./\\.}:4717" || fail "Dad's laptop does not list Mom's new address as found"
[ "$(balance 0)" = 975 ] || fail "balance $(balance 0), not 975"
for i in 0 1; do
  deadline=$(( $(date +%s) + 30 ))
  until [ "$("$bin" --home "${home[$i]}" --json status | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')" = synced ]; do
    [ "$(date +%s)" -lt "$deadline" ] || fail "laptop $i's status is not synced 30 s after converging (a dead address keeps it pending?)"
    sleep 0.5
  done
done

say "IPv6 alone: no IPv4 address, every IPv4 packet dropped; only ${addr6[0]} and ${addr6[1]} (link-local)"
# Dad's `join` typed the address it heard the invitation at: Mom's IPv4 address, or her link-local
# one when the IPv6 copy of the announcement came first (both go out together). A typed address
# stays typed, so discovery never "finds" it: that record is removed here, as a user would with
# `peer remove`, so that this leg proves Dad's daemon learns Mom's link-local address by multicast.
typed6="[${addr6[0]}%${links[1]}]:4717"
if "$bin" --home "${home[1]}" --json peers | python3 -c 'import json,sys; sys.exit(0 if any(p["address"] == sys.argv[1] and p["learnedFrom"] == "typed" for p in json.load(sys.stdin)["peers"]) else 1)' "$typed6"; then
  kl 1 peer remove "$typed6" >/dev/null
  say "Dad's join had typed Mom's link-local address $typed6: removed, to be found by multicast"
fi
for i in 0 1; do
  ip -n "${ns[$i]}" -4 addr flush dev "${links[$i]}"
  ip netns exec "${ns[$i]}" iptables -A INPUT -i "${links[$i]}" -j DROP
  ip netns exec "${ns[$i]}" iptables -A OUTPUT -o "${links[$i]}" -j DROP
done
# Each finds the other's link-local address by an IPv6 multicast announcement.
discovered 30 0 "\[fe80::79:2%${links[0]}\]:4717" || fail "Mom's daemon did not find Dad's by IPv6 multicast within 30 s"
discovered 30 1 "\[fe80::79:1%${links[1]}\]:4717" || fail "Dad's daemon did not find Mom's by IPv6 multicast within 30 s"
say "each found the other at its link-local address by multicast (learnedFrom: announcement)"
kl 0 give Ava '$0.50' --note "mom, over IPv6" >/dev/null
kl 1 give Ava '$0.25' --note "dad, over IPv6" >/dev/null
converge 60 || fail "the laptops did not sync over IPv6 within 60 s"
[ "$(balance 0)" = 1050 ] && [ "$(balance 1)" = 1050 ] || fail "balances $(balance 0) and $(balance 1), not 1050"
grep -q "sync with \[fe80::79:" "$work/daemon0.log" "$work/daemon1.log" || fail "no session went over IPv6"
say "synced over IPv6 link-local"

say "Gran's laptop, IPv6 alone (${addr6[2]}), joins with a short code heard by multicast"
# With no IPv4 and no global IPv6 address, Mom's laptop has no address to put in the long code:
# `--address` gives her link-local one as Gran's laptop reaches it (the short code's join dials
# whatever answered its announcement first anyway).
short=$(kl 0 invite --address "[${addr6[0]}%${links[2]}]:4717" 2>/dev/null | grep -o '[0-9A-Z]\{4\}-[0-9A-Z]\{4\}-[0-9A-Z]\{4\}' | head -n 1)
[ -n "$short" ] || fail "invite printed no short code"
mkdir -p "${home[2]}"
kl 2 join "$short" --wait 20 >/dev/null || fail "Gran's join with the short code $short did not find Mom's laptop over IPv6"
"$bin" --home "${home[2]}" --json peers | python3 -c 'import json,sys; sys.exit(0 if any(p["address"] == sys.argv[1] for p in json.load(sys.stdin)["peers"]) else 1)' "[${addr6[0]}%${links[2]}]:4717" \
  || fail "Gran's laptop did not join through Mom's link-local address"
deadline=$(( $(date +%s) + 10 ))
until [ "$(digest 2)" = "$(digest 0)" ]; do
  [ "$(date +%s)" -lt "$deadline" ] || fail "Gran's laptop does not hold Mom's ledger after the join"
  sleep 0.5
done
say "Gran's laptop joined over IPv6 link-local"
say "passed: digests $(digest 0 | cut -c1-16)…, both show \$10.50, both synced"
