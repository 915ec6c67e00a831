#!/usr/bin/env bash
# Installs the Debian packages kidledger builds against, if they are missing.
# Safe to run repeatedly; uses sudo when not root.
set -euo pipefail

packages=(liblmdb-dev libsodium-dev libqrencode-dev pkg-config)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
command -v swift >/dev/null || { echo "setup: the Swift toolchain (swift) is not on PATH" >&2; exit 1; }
