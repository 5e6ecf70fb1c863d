#!/usr/bin/env python3
"""One optimizer step of the PyTorch reference under torch.profiler, saved as a Chrome trace.

  anchor_profile.py --micro-batch 64 --trace anchor-64x1.trace.json [--preset gpt2-124m --seq-len 1024 --batch 64]

Builds the model of ../shared/bench/pytorch_anchor.py (imported, not copied) and runs its step:
bf16 autocast, (loss / accumulation steps).backward() per micro-batch, fused AdamW, TF32 allowed.
Two warmup steps, then one profiled step. bench/kernel_diff.py compares the trace with the one
`accumbench sweep --profile DIR` writes for the same split.
"""
import argparse
import os
import sys

import torch

# ../shared/bench beside the checkout, or the copy scripts/stage-gpu-deps.sh puts in .gpu-deps.
_repo = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path[:0] = [os.path.join(_repo, "..", "shared", "bench"), os.path.join(_repo, ".gpu-deps", "shared", "bench")]
import pytorch_anchor as anchor  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="gpt2-124m", choices=anchor.PRESETS)
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--micro-batch", type=int, required=True)
    ap.add_argument("--trace", required=True)
    a = ap.parse_args()
    V, L, d, h = anchor.PRESETS[a.preset]
    T, E, mb = a.seq_len, a.batch, a.micro_batch
    ga = E // mb
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.manual_seed(0)
    m = anchor.GPT(V, T, L, d, h).cuda()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, fused=True)
    data = torch.randint(0, V, (E, T + 1), device="cuda")

    def step():
        for k in range(ga):
            chunk = data[k * mb:(k + 1) * mb]
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = m(chunk[:, :-1], chunk[:, 1:])
            (loss / ga).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(2):
        step()
    torch.cuda.synchronize()
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities, record_shapes=True) as prof:
        step()
        torch.cuda.synchronize()
    prof.export_chrome_trace(a.trace)
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=25))


if __name__ == "__main__":
    main()
