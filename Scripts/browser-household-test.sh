#!/usr/bin/env bash
# The whole household in the page as a parent uses it (issue 41, point 6; docs/UI.md, "The
# household test"): two empty homes, Chromium only, from starting the household to revoking Dad.
# Installs Debian's chromium, chromium-driver and python3-selenium when missing (as root; apt-get
# update once), as Scripts/browser-test.sh does; skips, saying so, when they are missing and this is
# not root. As root the two laptops are network namespaces (real discovery); otherwise loopback.
# Screenshots of each step at 1280 px and 360 px go to OUTPUT_DIR (default: a new folder in /tmp,
# printed). Bounded: `timeout` stops it after 420 s.
#
#   Scripts/browser-household-test.sh [OUTPUT_DIR]
#   HOUSEHOLD_TEST_SKIP_PILL=1 Scripts/browser-household-test.sh   # without the `offline` step
set -euo pipefail
cd "$(dirname "$0")/.."
Scripts/browser-packages.sh || { status=$?; [ "$status" -eq 77 ] && exit 0; exit "$status"; }
out="${1:-$(mktemp -d /tmp/kidledger-household-shots.XXXXXX)}"
swift build --product kidledger 2>&1 | tail -n 1
bin="$(swift build --show-bin-path)/kidledger"
timeout 420 /usr/bin/python3 Tests/Browser/household_test.py "$bin" "$out"
