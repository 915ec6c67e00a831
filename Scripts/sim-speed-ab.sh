#!/usr/bin/env bash
# Measures the simulator's speed of two builds side by side, alternating, so that a machine that
# slows down or speeds up during the runs moves both alike (docs/PERFORMANCE.md).
#
#   Scripts/sim-speed-ab.sh OLD_BINARY NEW_BINARY [ROUNDS] [SEEDS] [JOBS]
#
# Each round runs `kidledger-sim fuzz --seeds SEEDS --start 1 --jobs JOBS --no-rerun` with each
# binary (the order flips every round) and prints its simulated/wall ratio and user CPU seconds;
# the last lines are each binary's median ratio and median CPU, and the CPU of NEW over OLD.
# Defaults: 6 rounds of 1,000 seeds on 2 jobs (issue 42: a change may cost the simulator at most a quarter).
# Build an older commit's binary in a worktree with its own scratch path, e.g.
#   git worktree add /tmp/old REV && (cd /tmp/old && swift build -c release --product kidledger-sim)
set -euo pipefail
OLD=$1 NEW=$2 ROUNDS=${3:-6} SEEDS=${4:-1000} JOBS=${5:-2}
for b in "$OLD" "$NEW"; do [ -x "$b" ] || { echo "not an executable: $b" >&2; exit 64; }; done
results=$(mktemp)
trap 'rm -f "$results"' EXIT
for round in $(seq 1 "$ROUNDS"); do
    if [ $((round % 2)) -eq 1 ]; then order="old new"; else order="new old"; fi
    for which in $order; do
        bin=$OLD; [ "$which" = new ] && bin=$NEW
        line=$( { /usr/bin/time -f "cpu=%U" "$bin" fuzz --seeds "$SEEDS" --start 1 --jobs "$JOBS" --no-rerun; } 2>&1 \
            | grep -oE "failures=[0-9]+|virtualToWall=[0-9]+|cpu=[0-9.]+" | tr '\n' ' ')
        echo "round $round $which $line"
        echo "$which $line" >> "$results"
    done
done
python3 - "$results" <<'PY'
import re, statistics, sys
rows = {"old": [], "new": []}
for line in open(sys.argv[1]):
    which = line.split()[0]
    v = dict(kv.split("=") for kv in re.findall(r"\w+=[0-9.]+", line))
    rows[which].append((int(v["virtualToWall"]), float(v["cpu"]), int(v["failures"])))
for which in ("old", "new"):
    r = rows[which]
    print(f"{which}: median {statistics.median(x[0] for x in r)}x (runs {', '.join(str(x[0]) for x in r)}), "
          f"median user CPU {statistics.median(x[1] for x in r):.2f} s, failures {sum(x[2] for x in r)}")
old_cpu = statistics.median(x[1] for x in rows["old"]); new_cpu = statistics.median(x[1] for x in rows["new"])
print(f"new/old user CPU: {new_cpu / old_cpu:.3f}")
PY
