#!/usr/bin/env bash
# Runs the whole test suite: installs what is missing, builds, and runs `swift test`.
set -euo pipefail
cd "$(dirname "$0")/.."
Scripts/setup.sh
swift build --build-tests 2>&1 | tail -n 3
swift test "$@"
Scripts/render-svg-check.sh   # the simulator's SVG diagrams render (rsvg-convert)
