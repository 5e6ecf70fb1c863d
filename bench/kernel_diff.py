#!/usr/bin/env python3
"""Compares the GPU kernels of two Chrome traces of the same training step, kernel by kernel.

  kernel_diff.py ours.trace.json pytorch.trace.json [--top 25]

Traces: `accumbench sweep --profile DIR` (LibTorch's Kineto) and bench/anchor_profile.py
(torch.profiler); both write Kineto's Chrome trace format. GPU activities are the events whose
"cat" is kernel, gpu_memcpy or gpu_memset. Prints the GPU time of each trace (sum of durations,
and the union of intervals, which counts overlapping streams once), then the kernels whose total
time differs most. Standard library only, so it also runs where PyTorch is not installed.
"""
import argparse
import json
from collections import defaultdict

GPU_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}


def gpu_events(path):
    with open(path) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    return [e for e in events if e.get("ph") == "X" and str(e.get("cat", "")).lower() in GPU_CATEGORIES]


def union_us(events):
    spans = sorted((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))) for e in events)
    total, start, end = 0.0, None, None
    for s, e in spans:
        if end is None or s > end:
            if end is not None:
                total += end - start
            start, end = s, e
        else:
            end = max(end, e)
    if end is not None:
        total += end - start
    return total


def by_name(events):
    table = defaultdict(lambda: [0, 0.0])  # name -> [count, total us]
    for e in events:
        row = table[e["name"]]
        row[0] += 1
        row[1] += float(e.get("dur", 0))
    return table


def short(name, width=90):
    return name if len(name) <= width else name[: width - 1] + "\u2026"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ours")
    ap.add_argument("theirs")
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    ours, theirs = gpu_events(a.ours), gpu_events(a.theirs)
    sum_ours = sum(float(e.get("dur", 0)) for e in ours)
    sum_theirs = sum(float(e.get("dur", 0)) for e in theirs)
    print(f"| trace | GPU events | GPU time ms (sum) | GPU busy ms (union) |")
    print(f"| --- | --- | --- | --- |")
    print(f"| accumbench | {len(ours)} | {sum_ours / 1e3:.3f} | {union_us(ours) / 1e3:.3f} |")
    print(f"| PyTorch | {len(theirs)} | {sum_theirs / 1e3:.3f} | {union_us(theirs) / 1e3:.3f} |")
    print()
    a_table, b_table = by_name(ours), by_name(theirs)
    names = set(a_table) | set(b_table)
    rows = []
    for name in names:
        ca, ta = a_table.get(name, [0, 0.0])
        cb, tb = b_table.get(name, [0, 0.0])
        rows.append((ta - tb, name, ca, ta, cb, tb))
    rows.sort(key=lambda r: (-abs(r[0]), r[1]))
    print(f"| kernel | accumbench n | accumbench ms | PyTorch n | PyTorch ms | difference ms |")
    print(f"| --- | --- | --- | --- | --- | --- |")
    for diff, name, ca, ta, cb, tb in rows[: a.top]:
        print(f"| {short(name)} | {ca} | {ta / 1e3:.3f} | {cb} | {tb / 1e3:.3f} | {diff / 1e3:+.3f} |")


if __name__ == "__main__":
    main()
