#!/usr/bin/env bash
# What the browser tests need (Scripts/browser-test.sh, Scripts/browser-household-test.sh):
# Debian's chromium, chromium-driver and python3-selenium, installed when missing (as root, after
# one apt-get update). Exit 77, saying so, when they are missing and this is not root.
set -euo pipefail
packages=(chromium chromium-driver python3-selenium)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "browser test: SKIPPED: ${missing[*]} not installed and not root (apt-get install ${missing[*]})" >&2
    exit 77
  fi
  echo "browser test: installing ${missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
