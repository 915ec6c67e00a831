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
Scripts/browser-packages.sh || { status=$?; [ "$status" -eq 77 ] && exit 0; exit "$status"; }
swift build --product kidledger 2>&1 | tail -n 1
bin="$(swift build --show-bin-path)/kidledger"
# Debian's selenium is for Debian's Python, whatever python3 is first on PATH.
timeout 240 /usr/bin/python3 Tests/Browser/page_test.py "$bin" "$@"
