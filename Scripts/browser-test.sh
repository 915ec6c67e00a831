#!/usr/bin/env bash
# The family page in headless Chromium (docs/UI.md, "The browser test"): installs Debian's chromium,
# chromium-driver and python3-selenium when missing (as root; apt-get update once), then runs
# Tests/Browser/page_test.py against the debug build's kidledger. Skips, saying so, when the
# packages are missing and this is not root. Bounded: the script itself stops after 150 s,
# `timeout` after 240 s.
#
#   Scripts/browser-test.sh [SCREENSHOT.png]
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(chromium chromium-driver python3-selenium)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "browser test: SKIPPED: ${missing[*]} not installed and not root (apt-get install ${missing[*]})" >&2
    exit 0
  fi
  echo "browser test: installing ${missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
swift build --product kidledger 2>&1 | tail -n 1
bin="$(swift build --show-bin-path)/kidledger"
# Debian's selenium is for Debian's Python, whatever python3 is first on PATH.
timeout 240 /usr/bin/python3 Tests/Browser/page_test.py "$bin" "$@"
