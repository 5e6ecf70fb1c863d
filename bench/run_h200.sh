#!/usr/bin/env bash
# One call on the GPU machine: build against its PyTorch's LibTorch, run accumbench's sweep and the
# plain-PyTorch reference on the same configuration (GPT-2 124M, vocab 50304 as the reference,
# T=1024, batch 64, bf16), and print the side-by-side table with ratios. Results go to $OUT (the
# device tool brings that folder back) or bench/out.
#   bench/run_h200.sh            # full grid 1,2,4,...,64
#   MICRO=8,64 bench/run_h200.sh # fewer splits
# Before the call, on the CPU machine: scripts/stage-gpu-deps.sh, and pass carry [".gpu-deps"].
set -euo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-bench/out}"
mkdir -p "$out"
micro="${MICRO:-1,2,4,8,16,32,64}"
anchor=../shared/bench/pytorch_anchor.py

scripts/build.sh -DACCUMBENCH_BUILD_TESTS=OFF 2>&1 | tail -n 20
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"

python3 "$anchor" --preset gpt2-124m --seq-len 1024 --batch 64 --micro-batches "$micro" | tee "$out/anchor-eager.jsonl"
build/accumbench sweep --hf-config bench/gpt2-124m-50304.json --seq-len 1024 --batch 64 --micro-batches "$micro" \
  --device cuda --precision bf16 --json "$out/accumbench.json" --html "$out/report.html" | tee "$out/accumbench.txt"
python3 "$anchor" --preset gpt2-124m --seq-len 1024 --batch 64 --micro-batches 64 --compile | tee "$out/anchor-compile.jsonl"
python3 bench/side_by_side.py "$out/accumbench.json" "$out/anchor-eager.jsonl" "$out/anchor-compile.jsonl" | tee "$out/side-by-side.md"
