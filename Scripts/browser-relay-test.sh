#!/usr/bin/env bash
# The relay on the family page (issue 44, points 1 and 4; docs/UI.md, "The relay test"): on
# 127.0.0.1 only, Mom's and Dad's daemons and a relay (`relay serve --listen 127.0.0.1:PORT`);
# Mom's page adds the relay by its code and sees it reachable, Dad's page shows Mom's laptop "via
# the relay" and, with Mom's laptop out of direct reach, a give through the relay and the pill
# "synced through the relay"; Mom removes the relay on her page. Installs Chromium as
# Scripts/browser-test.sh does (skips, saying so, when it can't). Screenshots of each step go to
# OUTPUT_DIR (default: a new folder in /tmp, printed); RELAY_TEST_DOC_SHOT=docs/relay.png retakes
# the docs' picture of the panel. Bounded: `timeout` stops it after 600 s.
#
#   Scripts/browser-relay-test.sh [OUTPUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
Scripts/browser-packages.sh || { status=$?; [ "$status" -eq 77 ] && exit 0; exit "$status"; }
out="${1:-$(mktemp -d /tmp/kidledger-relay-shots.XXXXXX)}"
swift build --product kidledger 2>&1 | tail -n 1
bin="$(swift build --show-bin-path)/kidledger"
timeout 600 /usr/bin/python3 Tests/Browser/relay_test.py "$bin" "$out"
