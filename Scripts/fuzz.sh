#!/usr/bin/env bash
# Coverage-guided fuzzing of the decoders and parsers with libFuzzer (docs/FUZZING.md).
#
#   Scripts/fuzz.sh TARGET SECONDS   build if needed, then fuzz TARGET for SECONDS
#   Scripts/fuzz.sh all SECONDS      every target in turn, SECONDS each
#   Scripts/fuzz.sh build            only build the fuzzer
#   Scripts/fuzz.sh seeds            rewrite Fuzz/corpus/*/seed-* from real encodings
#   Scripts/fuzz.sh list             the target names
#
# The fuzzer is one binary, `kidledger-fuzz`, built with `swiftc -sanitize=fuzzer,address` from
# Fuzz/Sources and the package's sources (not by `swift build`: libFuzzer supplies `main`) into
# $KIDLEDGER_FUZZ_BUILD (default .build/fuzz). Each run reads the seed corpus Fuzz/corpus/TARGET and
# grows a scratch corpus in $KIDLEDGER_FUZZ_WORK/corpus/TARGET (default /tmp/kidledger-fuzz, outside
# the repository); crashes go to $KIDLEDGER_FUZZ_WORK/crashes/TARGET. Exit status: 0 when no target
# crashed, 1 when one did (the crash file is named), 64 for bad arguments.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
build="${KIDLEDGER_FUZZ_BUILD:-$root/.build/fuzz}"
work="${KIDLEDGER_FUZZ_WORK:-/tmp/kidledger-fuzz}"
# libFuzzer reports crashes itself; the Swift runtime's backtracer would only slow that down.
export SWIFT_BACKTRACE=enable=no
targets=(frame message record handshake csv invite announcement amount http session relay relaymessage)
# Package modules in dependency order (KidLedgerInMemory for its in-memory store; KidLedgerUI for the
# page's request parser, which needs KidLedgerTransport); CSodium and CLMDB are system modules
# (Sources/*/module.modulemap).
modules=(KidLedgerSystem KidLedgerDomain KidLedgerSecurity KidLedgerReplica KidLedgerInMemory KidLedgerProtocol KidLedgerLMDB
         KidLedgerRelay KidLedgerTransport KidLedgerUI)
flags=(-swift-version 6 -package-name kidledger -O -g -parse-as-library -sanitize=fuzzer,address -I "$build" -I "$root/Sources/CSodium"
       -I "$root/Sources/CLMDB")

usage() {
  echo "usage: Scripts/fuzz.sh TARGET|all SECONDS | build | seeds | list   (targets: ${targets[*]})" >&2
  exit 64
}

# Builds the modules (static libraries, instrumented) and the fuzzer; skips what is up to date.
build_fuzzer() {
  mkdir -p "$build"
  local stamp="" libs=()
  for m in "${modules[@]}"; do
    local lib="$build/lib$m.a"
    if [ ! -f "$lib" ] || [ -n "$stamp" ] || [ -n "$(find "Sources/$m" -newer "$lib" -name '*.swift' | head -n 1)" ]; then
      echo "fuzz: building $m" >&2
      swiftc "${flags[@]}" -module-name "$m" -emit-module -emit-module-path "$build/$m.swiftmodule" \
        -emit-library -static -o "$lib" $(find "Sources/$m" -name '*.swift' | sort)
      stamp=rebuilt
    fi
    libs+=("-l$m")
  done
  local bin="$build/kidledger-fuzz"
  if [ ! -f "$bin" ] || [ -n "$stamp" ] || [ -n "$(find Fuzz/Sources -newer "$bin" -name '*.swift' | head -n 1)" ]; then
    echo "fuzz: linking kidledger-fuzz" >&2
    swiftc "${flags[@]}" -use-ld=lld -module-name KidLedgerFuzz -L "$build" "${libs[@]}" -lsodium -llmdb \
      Fuzz/Sources/*.swift -o "$bin"
  fi
}

# Runs one target for $2 seconds and prints its numbers; returns 1 on a crash.
run_target() {
  local target="$1" seconds="$2"
  local scratch="$work/corpus/$target" crashes="$work/crashes/$target" log="$work/logs/$target.log"
  mkdir -p "$scratch" "$crashes" "$work/logs" "Fuzz/corpus/$target"
  local status=0
  KIDLEDGER_FUZZ_TARGET="$target" "$build/kidledger-fuzz" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 \
    -max_len=4096 -print_final_stats=1 -artifact_prefix="$crashes/" "$scratch" "Fuzz/corpus/$target" > "$log" 2>&1 || status=$?
  local runs execs corpus cov
  runs=$(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}' | tail -n 1 || true)
  execs=$(grep -E '^stat::average_exec_per_sec' "$log" | awk '{print $2}' | tail -n 1 || true)
  cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -n 1 || true)
  # libFuzzer's corpus: the distinct inputs that each add coverage (seeds plus scratch), and their size.
  corpus=$(grep -oE 'corp: [0-9]+/[0-9]+[a-zA-Z]*' "$log" | tail -n 1 | sed 's/corp: //; s|/| inputs, |' || true)
  if [ "$status" -ne 0 ]; then
    local artifact
    artifact=$(grep -oE 'Test unit written to [^ ]+' "$log" | tail -n 1 | sed 's/Test unit written to //' || true)
    grep -E 'property violated|Fatal error|ERROR: (AddressSanitizer|libFuzzer)|deadly signal' "$log" | head -n 3 >&2 || true
    runs=$(grep -oE '^#[0-9]+' "$log" | tail -n 1 | tr -d '#' || true)
    echo "fuzz: $target: CRASH after ${runs:-?} executions: ${artifact:-no crash file (see $log)}"
    echo "fuzz: reproduce: SWIFT_BACKTRACE=enable=no KIDLEDGER_FUZZ_TARGET=$target $build/kidledger-fuzz ${artifact:-}"
    return 1
  fi
  echo "fuzz: $target: ${runs:-?} executions in $seconds s (${execs:-?}/s), corpus ${corpus:-?}, ${cov:-cov: ?}, no crash"
}

command -v swiftc >/dev/null && command -v clang >/dev/null || { echo "fuzz: the Swift toolchain (swiftc, clang) is not on PATH" >&2; exit 1; }
case "${1:-}" in
  list) printf '%s\n' "${targets[@]}" ;;
  build) build_fuzzer ;;
  seeds)
    build_fuzzer
    for t in "${targets[@]}"; do
      rm -rf "Fuzz/corpus/$t"/seed-*
      mkdir -p "Fuzz/corpus/$t"
      KIDLEDGER_FUZZ_TARGET="$t" KIDLEDGER_FUZZ_WRITE_SEEDS="Fuzz/corpus/$t" "$build/kidledger-fuzz"
      echo "fuzz: $t: $(find "Fuzz/corpus/$t" -type f | wc -l) seeds, $(cat "Fuzz/corpus/$t"/* | wc -c) bytes"
    done
    ;;
  all)
    [[ "${2:-}" =~ ^[0-9]+$ ]] || usage
    build_fuzzer
    failed=0
    for t in "${targets[@]}"; do run_target "$t" "$2" || failed=1; done
    exit $failed
    ;;
  *)
    [[ " ${targets[*]} " == *" ${1:-none} "* && "${2:-}" =~ ^[0-9]+$ ]] || usage
    build_fuzzer
    run_target "$1" "$2"
    ;;
esac
