#!/usr/bin/env python3
"""Prints accumbench's sweep next to the PyTorch reference measured in the same run.

  side_by_side.py accumbench.json anchor-eager.jsonl [anchor-compile.jsonl]

accumbench.json comes from `accumbench sweep --json`; the .jsonl files from
../shared/bench/pytorch_anchor.py (one JSON line per micro-batch). Ratio = ours / PyTorch's median
step time: below 1.00 means accumbench's LibTorch step is faster. Standard library only.
"""
import json
import sys


def anchor_rows(path):
    rows = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            row = json.loads(line)
            if "mb" in row:
                rows[row["mb"]] = row
    return rows


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    ours = json.load(open(sys.argv[1]))
    eager = anchor_rows(sys.argv[2])
    compiled = anchor_rows(sys.argv[3]) if len(sys.argv) > 3 else {}
    ctx = ours["context"]
    print(f"# {ctx['model']}, T={ctx['seq_len']}, batch {ctx['batch']}, {ctx['device_name']}, "
          f"LibTorch {ctx['libtorch_version']}, {ctx['date']}")
    print()
    print("| split | accumbench step s | PyTorch eager step s | ratio | accumbench peak GiB | PyTorch peak GiB | compiled step s | device busy |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for run in ours["runs"]:
        cfg = run["config"]
        mb = cfg["micro_batch"]
        label = (f"{mb} × {cfg['accum_steps']}" + (" chunked-ce" if cfg.get("chunked_loss") else "")
                 + (" graphs" if cfg.get("cuda_graphs") else ""))
        if run["status"] != "ok":
            print(f"| {label} | {run['status']} | | | | | | |")
            continue
        step = run["step_seconds"]["median"]
        peak = run["peak_allocated_bytes"] / 2**30
        ref = eager.get(mb, {})
        ref_step = ref.get("step_s")
        ratio = f"{step / ref_step:.2f}" if ref_step else "-"
        comp = compiled.get(mb, {}).get("step_s", "")
        busy = run.get("device_busy_fraction")
        busy = f"{busy:.0%}" if isinstance(busy, (int, float)) else "-"
        print(f"| {label} | {step:.4f} | {ref_step if ref_step else '-'} | {ratio} | {peak:.2f} | "
              f"{ref.get('peak_gib', '-')} | {comp} | {busy} |")


if __name__ == "__main__":
    main()
