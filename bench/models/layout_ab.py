#!/usr/bin/env python3
"""Times a model's bundles of two import layouts side by side: ROUNDS rounds, each running
`padfold bench --model-only` on either bundle (the order alternating from round to round), and
writes the medians and the median of the per-round ratios as JSON. Whole-model latencies at 2
threads drift by 10-20% over minutes on a shared 2-core machine; a ratio taken within each round
cancels most of the drift.

Usage: layout_ab.py PADFOLD BUNDLE_A BUNDLE_B THREADS ROUNDS MIN_TIME > out.json"""
import json
import statistics
import subprocess
import sys


def model_ms(padfold, bundle, threads, min_time):
    out = subprocess.run([padfold, "bench", bundle, "--model-only", "--threads", str(threads),
                          "--min-time", str(min_time), "--retries", "2", "--json"],
                         capture_output=True, text=True, check=True).stdout
    run = json.loads(out)["runs"][0]
    return run["model_median_ms"], run["quiet"]


def main():
    padfold, a, b, threads, rounds, min_time = sys.argv[1:7]
    times = {"a": [], "b": []}
    ratios, quiet = [], True
    for r in range(int(rounds)):
        order = ("a", "b") if r % 2 == 0 else ("b", "a")
        got = {}
        for which in order:
            got[which], q = model_ms(padfold, a if which == "a" else b, threads, min_time)
            times[which].append(got[which])
            quiet = quiet and q
        ratios.append(got["a"] / got["b"])
    json.dump({"a": a, "b": b, "threads": int(threads), "rounds": int(rounds),
               "a_median_ms": statistics.median(times["a"]),
               "b_median_ms": statistics.median(times["b"]),
               "ratio_median": statistics.median(ratios), "ratios": ratios, "quiet": quiet},
              sys.stdout, indent=1)


if __name__ == "__main__":
    main()
