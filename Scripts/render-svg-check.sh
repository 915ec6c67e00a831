#!/usr/bin/env bash
# Checks that the simulator's space-time diagrams (kidledger-sim --svg) render: draws a passing
# scenario, a failing (planted-bug) seed and its shrunk scenario, converts each SVG to PNG with
# rsvg-convert (librsvg2-bin, installed with apt when missing) and checks that every PNG is
# non-trivial and exactly as large as its SVG says. Extra arguments go to `swift build`
# (e.g. --scratch-path DIR). Called by Scripts/test.sh after `swift test`.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v rsvg-convert >/dev/null; then
  echo "render-svg-check: installing librsvg2-bin" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq librsvg2-bin >/dev/null
fi

swift build --product kidledger-sim "$@" 2>&1 | tail -n 1
sim="$(swift build --show-bin-path "$@")/kidledger-sim"
out="$(mktemp -d /tmp/kidledger-svg.XXXXXX)"
trap 'rm -rf "$out"' EXIT

fail() { echo "render-svg-check: FAILED: $*" >&2; exit 1; }

"$sim" run Simulations/05-give-all-partition.scenario --svg "$out/passing.svg" >/dev/null \
  || fail "the passing scenario failed"
if "$sim" seed 7 --plant-bug cross-replica-undo --svg "$out/failing.svg" >/dev/null; then
  fail "seed 7 with the planted bug passed"
fi
"$sim" shrink --seed 7 --plant-bug cross-replica-undo --out "$out/shrunk.scenario" --svg "$out/shrunk.svg" >/dev/null \
  || fail "shrink of seed 7 failed"

# The big-endian 32-bit number at byte OFFSET of FILE.
u32() { od -An -tu1 -j "$2" -N4 "$1" | awk '{ print $1 * 16777216 + $2 * 65536 + $3 * 256 + $4 }'; }

for name in passing failing shrunk; do
  svg="$out/$name.svg" png="$out/$name.png"
  grep -q '<svg ' "$svg" || fail "$name.svg is not an SVG"
  if [ "$name" = passing ]; then
    grep -q 'class="failure"' "$svg" && fail "$name.svg highlights a failure"
    # 05-give-all-partition cuts r0 off from r1 and r2: a band on both sides of the cut.
    grep -q 'class="partition" data-side="cut-off"' "$svg" || fail "$name.svg bands no replica cut off by the partition"
    grep -q 'class="partition" data-side="rest"' "$svg" || fail "$name.svg does not band the other side of the partition"
  else
    grep -q 'class="failure"' "$svg" || fail "$name.svg does not highlight the failure"
  fi
  width=$(sed -n 's/^<svg [^>]* width="\([0-9]*\)" height="\([0-9]*\)".*/\1/p' "$svg")
  height=$(sed -n 's/^<svg [^>]* width="\([0-9]*\)" height="\([0-9]*\)".*/\2/p' "$svg")
  [ -n "$width" ] && [ -n "$height" ] || fail "$name.svg has no width and height"
  rsvg-convert "$svg" -o "$png" || fail "rsvg-convert could not render $name.svg"
  [ "$(head -c 8 "$png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] || fail "$name.png is not a PNG"
  bytes=$(stat -c %s "$png")
  # A blank page of this size compresses to a few kB; lanes, arrows and text need more.
  [ "$bytes" -gt 8000 ] || fail "$name.png is only $bytes bytes"
  pw=$(u32 "$png" 16) ph=$(u32 "$png" 20)
  [ "$pw" = "$width" ] && [ "$ph" = "$height" ] || fail "$name.png is ${pw}x$ph, the SVG says ${width}x$height"
  echo "render-svg-check: $name.svg -> ${pw}x$ph PNG, $bytes bytes"
done
echo "render-svg-check: ok"
