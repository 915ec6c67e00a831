#!/usr/bin/env bash
# Checks the systemd user unit `kidledger service install` writes: generates it with --dry-run (for a
# plain home and for one whose path needs quoting) and runs `systemd-analyze --user verify` on it.
# Any line systemd-analyze prints (an unknown key, a bad value, a missing ExecStart binary) fails.
#
# Usage: Scripts/check-unit.sh [KIDLEDGER_BINARY]
#   default binary: $KIDLEDGER_BIN, else .build/debug/kidledger (built when missing).
#   When systemd-analyze is missing it is installed (apt-get, package `systemd`) only as root with
#   KIDLEDGER_INSTALL_SYSTEMD=1; otherwise the check is skipped with exit 77.
# Exit: 0 the unit verifies, 1 it does not, 77 skipped.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

if ! command -v systemd-analyze >/dev/null; then
  if [ "${KIDLEDGER_INSTALL_SYSTEMD:-0}" = 1 ] && [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
    echo "check-unit: installing systemd (for systemd-analyze)" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq systemd >/dev/null
  else
    echo "check-unit: skipped: systemd-analyze is not installed (apt-get install systemd, or run as root with KIDLEDGER_INSTALL_SYSTEMD=1)" >&2
    exit 77
  fi
fi

bin="${1:-${KIDLEDGER_BIN:-}}"
if [ -z "$bin" ]; then
  bin="$root/.build/debug/kidledger"
  [ -x "$bin" ] || swift build --product kidledger --package-path "$root" >&2
fi
[ -x "$bin" ] || { echo "check-unit: $bin is not an executable" >&2; exit 1; }

# Outside /tmp when it can (a home under /tmp makes the unit leave PrivateTmp= out).
scratch=/tmp
if mkdir -p "$root/.build" 2>/dev/null && [ -w "$root/.build" ]; then scratch="$root/.build"; fi
tmp="$(mktemp -d "$scratch/kidledger-check-unit.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
mkdir -m 700 "$tmp/runtime"
status=0
for home in "$tmp/home" "$tmp/a home 100%"; do
  for listen in ":4717" "127.0.0.1:4717"; do
    "$bin" --home "$home" init "Check" >/dev/null 2>&1 || "$bin" --home "$home" children >/dev/null
    name="$(HOME="$tmp" "$bin" --home "$home" --json service status | sed -n 's/.*"unit":"\([^"]*\)".*/\1/p')"
    [ -n "$name" ] || { echo "check-unit: no unit name from service status" >&2; exit 1; }
    unit="$tmp/$name"
    HOME="$tmp" "$bin" --home "$home" service install --dry-run --listen "$listen" >"$unit" 2>/dev/null
    grep -q '^ExecStart=' "$unit" || { echo "check-unit: the dry run printed no unit" >&2; exit 1; }
    case "$tmp" in /tmp/*) ;; *) grep -q '^PrivateTmp=yes$' "$unit" || { echo "check-unit: no PrivateTmp=yes in $name" >&2; exit 1; } ;; esac
    # --user needs a runtime directory even offline; verify changes nothing on the system.
    if output="$(XDG_RUNTIME_DIR="$tmp/runtime" systemd-analyze --user verify "$unit" 2>&1)" && [ -z "$output" ]; then
      echo "check-unit: ok: $name (home \"$home\", --listen $listen)"
    else
      echo "check-unit: FAILED: $name (home \"$home\", --listen $listen):" >&2
      printf '%s\n' "$output" >&2
      sed 's/^/  | /' "$unit" >&2
      status=1
    fi
    rm -f "$unit"
  done
done
exit "$status"
