"""The peer of Scripts/bench.sh: Yrs (through the pycrdt package) on the same transactions.

Reads the TSV the bench's append step wrote (id, child id, cents, createdAt millis, note, source),
builds the equivalent map in one Yrs document (key: the transaction id as UUID text; value: a list
[child id, cents, createdAt, note, source]), encodes the whole document as one update (what an
initial sync would send) and applies it to an empty document. Prints one JSON line with the
medians over --runs runs.
"""
import json
import sys
import time

from pycrdt import Doc, Map


def main():
    args = sys.argv[1:]
    runs = 3
    if "--runs" in args:
        i = args.index("--runs")
        runs = int(args[i + 1])
        del args[i:i + 2]
    (path,) = args
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            tid, child, cents, created, note, source = line.rstrip("\n").split("\t")
            rows.append((tid, [child, int(cents), int(created), note, source]))

    def median(xs):
        xs = sorted(xs)
        n = len(xs)
        return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2

    build, encode, apply, size = [], [], [], 0
    for _ in range(runs):
        t0 = time.perf_counter()
        doc = Doc()
        ledger = doc.get("ledger", type=Map)
        with doc.transaction():
            for tid, value in rows:
                ledger[tid] = value
        t1 = time.perf_counter()
        update = doc.get_update()
        t2 = time.perf_counter()
        copy = Doc()
        copy.apply_update(update)
        received = copy.get("ledger", type=Map)
        t3 = time.perf_counter()
        assert len(received) == len(rows), (len(received), len(rows))
        build.append(t1 - t0)
        encode.append(t2 - t1)
        apply.append(t3 - t2)
        size = len(update)
    print(json.dumps({
        "entries": len(rows),
        "buildSeconds": median(build),
        "encodeSeconds": median(encode),
        "applySeconds": median(apply),
        "encodeApplySeconds": median([e + a for e, a in zip(encode, apply)]),
        "updateBytes": size,
        "bytesPerEntry": size / len(rows),
    }))


main()
