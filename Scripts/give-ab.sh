#!/usr/bin/env bash
# Times `kidledger give` side by side: two builds, each on a home of its own (one household, one
# child), with hyperfine (runs alternate between the two in blocks so drift hits both alike).
#
#   Scripts/give-ab.sh OLD NEW [RUNS]   # RUNS per build (default 200)
set -euo pipefail
old=$(realpath "$1"); new=$(realpath "$2"); runs=${3:-200}
command -v hyperfine > /dev/null || { echo "needs hyperfine (apt-get install hyperfine)" >&2; exit 69; }
dir=$(mktemp -d /tmp/give-ab.XXXXXX)
trap 'rm -rf "$dir"' EXIT
for b in old new; do
    bin=${!b}
    KIDLEDGER_HOME=$dir/$b "$bin" init Home > /dev/null
    KIDLEDGER_HOME=$dir/$b "$bin" child add Ava > /dev/null
done
blocks=4
for ((i = 1; i <= blocks; i++)); do
    hyperfine -N --warmup 5 --runs $((runs / blocks)) --export-json "$dir/block-$i.json" \
        -n old "env KIDLEDGER_HOME=$dir/old $old give Ava 1" \
        -n new "env KIDLEDGER_HOME=$dir/new $new give Ava 1" > /dev/null
done
python3 - "$dir" "$blocks" <<'PY'
import json, statistics, sys
d, blocks = sys.argv[1], int(sys.argv[2])
times = {"old": [], "new": []}
for i in range(1, blocks + 1):
    for r in json.load(open(f"{d}/block-{i}.json"))["results"]:
        times[r["command"]] += r["times"]
for name, t in times.items():
    t = sorted(t)
    print(f"{name}: {len(t)} gives, median {statistics.median(t) * 1000:.2f} ms, mean {statistics.mean(t) * 1000:.2f} ms, "
          f"p10 {t[len(t) // 10] * 1000:.2f} ms, p90 {t[len(t) * 9 // 10] * 1000:.2f} ms")
PY
