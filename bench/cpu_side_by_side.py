#!/usr/bin/env python3
"""accumbench's CPU sweep next to the PyTorch reference's steps (bench/reference/step_bench.py).

    cpu_side_by_side.py accumbench.json reference.jsonl

Per split: step time and peak allocated memory on each side and their ratios (ours / reference).
Then, per side, the least-squares fit step_s = n·a + b over the splits (n = accumulation steps at
the same effective batch): `a` is what each extra micro-step adds (host overhead per micro-step,
plus the lower efficiency of smaller micro-batches, which this fit cannot separate), `b` the rest.
Standard library only.
"""
import json
import sys


def fit(points):
    """Least squares y = a·x + b; returns (a, b)."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    a = sum((x - mx) * (y - my) for x, y in points) / sxx if sxx > 0 else 0.0
    return a, my - a * mx


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    ours = json.load(open(sys.argv[1]))
    ref, header = {}, {}
    for line in open(sys.argv[2]):
        row = json.loads(line)
        if "mb" in row:
            ref[row["mb"]] = row
        else:
            header = row
    ctx = ours["context"]
    job = ""  # what the reference ran beyond a plain fp32 full fine-tune (step_bench.py's header)
    if header.get("lora"):
        job += f", LoRA r{header['lora']['rank']} on {header['lora']['adapters']} linears"
    if header.get("weights_dtype", "fp32") != "fp32":
        job += f", {header['weights_dtype']} weights"
    if header.get("precision", "fp32") != "fp32":
        job += f", {header['precision']} autocast"
    if header.get("gradient_checkpointing"):
        job += ", checkpointed"
    print(f"## {ctx['model']}, T={ctx['seq_len']}, batch {ctx['batch']}{job}, CPU, "
          f"accumbench on LibTorch {ctx['libtorch_version']} vs reference on PyTorch {header.get('torch')}, "
          f"{header.get('threads')} threads, {ctx['date']}")
    print()
    print("| split | accumbench step s | reference step s | time ratio | accumbench peak MiB | reference peak MiB | memory ratio |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    ours_points, ref_points = [], []
    for run in ours["runs"]:
        cfg = run["config"]
        mb, n = cfg["micro_batch"], cfg["accum_steps"]
        label = f"{mb} × {n}"
        r = ref.get(mb)
        if run["status"] != "ok" or r is None:
            print(f"| {label} | {run['status']} | {'-' if r is None else r['step_s']} | | | | |")
            continue
        step, peak = run["step_seconds"]["median"], run["peak_allocated_bytes"] / 2**20
        rstep, rpeak = r["step_s"], r["peak_bytes"] / 2**20
        ours_points.append((n, step))
        ref_points.append((n, rstep))
        print(f"| {label} | {step:.3f} | {rstep:.3f} | {step / rstep:.2f} | {peak:.1f} | {rpeak:.1f} | {peak / rpeak:.4f} |")
    print()
    if len(ours_points) >= 2:
        for name, points in (("accumbench", ours_points), ("reference", ref_points)):
            a, b = fit(points)
            print(f"{name}: step_s = n × {a * 1e3:.1f} ms + {b:.3f} s (least squares over {len(points)} splits)")


if __name__ == "__main__":
    main()
