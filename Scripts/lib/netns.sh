# Shared by the network-namespace scripts (netns-check.sh, relay-netns-check.sh): source it with
# NETNS_NAME set to the script's name (the prefix of its messages).

# Exits 77 (a skip) with the reason on stderr.
netns_skip() { echo "$NETNS_NAME: skipped: $*" >&2; exit 77; }

# Skips unless this runs as root with every COMMAND:PACKAGE pair's command on the PATH; with
# KIDLEDGER_INSTALL_NETNS=1 (Scripts/test.sh sets it) it first installs the missing packages.
netns_require() {
  [ "$(id -u)" -eq 0 ] || netns_skip "needs root to create network namespaces"
  local pair commands=() packages=()
  for pair in "$@"; do
    command -v "${pair%%:*}" >/dev/null && continue
    commands+=("${pair%%:*}")
    [[ " ${packages[*]} " == *" ${pair#*:} "* ]] || packages+=("${pair#*:}")
  done
  [ "${#commands[@]}" -eq 0 ] && return 0
  [ "${KIDLEDGER_INSTALL_NETNS:-0}" = 1 ] || netns_skip "needs ${commands[*]} (apt-get install ${packages[*]})"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}" >/dev/null; } \
    || netns_skip "could not install ${packages[*]}"
}

# Creates the namespaces named before `--` (skips when root may not), after removing what a killed
# earlier run left behind: those namespaces, and the veth ends named after `--` still in the root
# namespace (killed between `ip link add` and `ip link set netns`, which would make `ip link add`
# fail with "File exists"). At exit, whatever happens, netns_cleanup stops the processes whose ids
# are in the array `pids`, deletes the namespaces and removes the folder $work.
netns_create() {
  NETNS_ALL=()
  local a links=() after=0
  for a in "$@"; do
    if [ "$a" = -- ]; then after=1; elif [ "$after" = 0 ]; then NETNS_ALL+=("$a"); else links+=("$a"); fi
  done
  trap netns_cleanup EXIT
  for a in "${NETNS_ALL[@]}"; do ip netns del "$a" 2>/dev/null || true; done
  for a in "${links[@]}"; do ip link del "$a" 2>/dev/null || true; done
  ip netns add "${NETNS_ALL[0]}" 2>/dev/null || netns_skip "this machine does not let root create network namespaces"
  for a in "${NETNS_ALL[@]:1}"; do ip netns add "$a"; done
}

netns_cleanup() {
  local p n
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for n in "${NETNS_ALL[@]}"; do ip netns del "$n" 2>/dev/null || true; done
  rm -rf "$work"
}
