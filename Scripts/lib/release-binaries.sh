# Shared by the relay benchmarks (relay-bench.sh, relay-join-bench.sh): source it from the
# repository's root. Sets KL and BENCH to absolute paths of the release kidledger and
# kidledger-bench. Unless KL or BENCH names others (bench.sh passes its own), it builds both first,
# each on its own (one `swift build` with two --product flags builds only the last), so they are
# current. Exits 64 when either is missing.
if [ -z "${KL:-}${BENCH:-}" ]; then
    for product in kidledger kidledger-bench; do swift build -c release --product "$product" 2>&1 | tail -n 1 >&2; done
fi
KL=${KL:-.build/release/kidledger}
BENCH=${BENCH:-.build/release/kidledger-bench}
[ -x "$KL" ] && [ -x "$BENCH" ] || { echo "no release binaries at $KL and $BENCH" >&2; exit 64; }
KL=$(cd "$(dirname "$KL")" && pwd)/$(basename "$KL")
BENCH=$(cd "$(dirname "$BENCH")" && pwd)/$(basename "$BENCH")
