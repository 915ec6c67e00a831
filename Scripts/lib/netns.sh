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
