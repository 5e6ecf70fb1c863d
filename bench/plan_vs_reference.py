#!/usr/bin/env python3
"""Prints accumbench's planned peaks next to the PyTorch reference's measured ones.

  plan_vs_reference.py [--bar 0.03] NAME=REFERENCE.jsonl,PLAN.json [NAME=...]

REFERENCE.jsonl: bench/reference/step_bench.py's output (a header line, then one JSON line per
split with mb, ga, peak_bytes); PLAN.json: `accumbench plan --json` of the same shape and splits.
One row per split: measured, predicted, (predicted − measured) / measured. Exit 1 when an error
exceeds --bar (a fraction; 0: only print). Standard library only.
"""
import argparse
import json
import sys


def rows(reference, plan):
    with open(reference) as f:
        measured = [json.loads(line) for line in f if line.startswith("{")]
    planned = {s["split"]: s for s in json.load(open(plan))["splits"]}
    # A checkpointed reference (--gradient-checkpointing) against the plan's checkpointed split.
    suffix = " ckpt" if any(row.get("gradient_checkpointing") for row in measured) else ""
    for row in measured:
        if "mb" not in row or row.get("peak_bytes") is None:  # a CPU run of hf_real_step.py has no peak
            continue
        split = f"{row['mb']}×{row['ga']}{suffix}"
        if split in planned:
            yield split, row["peak_bytes"], planned[split]["peak_bytes"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bar", type=float, default=0.03, help="largest |error| accepted (fraction; 0: no check)")
    p.add_argument("cases", nargs="+", metavar="NAME=REFERENCE.jsonl,PLAN.json")
    a = p.parse_args()
    bad = []
    print(f"{'case':24} {'split':9} {'measured':>13} {'predicted':>13} {'error':>8}")
    for case in a.cases:
        name, _, paths = case.partition("=")
        reference, _, plan = paths.partition(",")
        found = False
        for split, measured, predicted in rows(reference, plan):
            found = True
            error = (predicted - measured) / measured
            print(f"{name:24} {split:9} {measured:13d} {predicted:13d} {100 * error:+7.2f}%")
            if a.bar > 0 and abs(error) > a.bar:
                bad.append(f"{name} {split}: predicted {predicted} against measured {measured} ({100 * error:+.2f} %)")
        if not found:
            bad.append(f"{name}: no split of {reference} is in {plan}")
    for line in bad:
        print("FAIL:", line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
