#!/usr/bin/env bash
# One call on the GPU machine (15 minutes of device time per session: keep it to one call):
#  1. build the CLI, the GPU tests and the tracer benchmark against its PyTorch's LibTorch;
#  2. the PyTorch reference (eager, and compiled at 64×1) and accumbench's sweep, eager and
#     from CUDA graphs, on the same configuration (GPT-2 124M, vocab 50304 as the reference,
#     T=1024, batch 64, bf16), and the side-by-side table with ratios; then the GPU tests (CUDA
#     graphs against eager steps, verify --cuda-graphs, the plan against CUDA peaks);
#  3. one profiled step at 64×1 and 1×64 on both sides, compared kernel by kernel
#     (bench/kernel_diff.py), to explain any gap;
#  4. the tracer's overhead;
#  5. the LoRA job that motivated the tool: Qwen3-1.7B, fp16 weights, LoRA r16, T=512, batch 4 and 16,
#     in transformers' own Qwen3 + PEFT, and its framework host time per micro-step calibrated as that job;
#  (after 2) the PyTorch reference of bench/reference/ on this machine's PyTorch 2.x: the ctest
#     cross-check (reference.*: loss and gradients of every family against an exported step), then
#     its step time and CUDA peak per split (HF's math, SDPA attention, bf16 autocast) beside
#     accumbench's sweep of the same shape: issue 18's side by side; calibrate-framework (with
#     transformers' own model where it imports); TRL's step (hf-trl, chunked_nll and nll), the
#     plain reference and AdamW's fused and foreach kernels (reference, sweep) against the plan
#     (plan_vs_reference.py); a real transformers + PEFT LoRA step.
# Every stage has its own time limit, and a stage that would start after BUDGET_S (540 s) is
# skipped, so the call ends inside the device's 10 minutes; stages run most important first.
# Results go to $OUT (the device tool brings that folder back: 8 files at most, so the small ones
# are bundled into results.tar.gz) or bench/out. Each stage logs to $out and goes on after a
# failure, so one broken stage does not lose the others' numbers.
#   bench/run_h200.sh                 # full grid 1,2,4,...,64
#   MICRO=1,8,64 bench/run_h200.sh    # fewer splits
# Before the call, on the CPU machine: scripts/stage-gpu-deps.sh, and pass carry [".gpu-deps"].
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-bench/out}"
work="$out/results"
mkdir -p "$work"
printf 'stage\tseconds\tlimit\texit\n' > "$work/stages.tsv"
micro="${MICRO:-1,2,4,8,16,32,64}"
anchor=../shared/bench/pytorch_anchor.py
[ -f "$anchor" ] || anchor=.gpu-deps/shared/bench/pytorch_anchor.py   # ../shared does not travel: staged copy
export PYTHONUNBUFFERED=1
status=0
deadline=$((SECONDS + ${BUDGET_S:-540}))   # the device call allows 600 s
bundle() { tar czf "$out/results.tar.gz" -C "$out" results 2>/dev/null; }
stage() {  # stage NAME SECONDS COMMAND...: runs (killed after SECONDS or at the deadline), logs to $work/NAME.log
  local name=$1 limit=$2
  shift 2
  local left=$((deadline - SECONDS))
  if [ "$left" -lt 20 ]; then
    echo "=== $name SKIPPED (out of time)" | tee "$work/$name.log"
    printf '%s\tskipped\n' "$name" >> "$work/stages.tsv"
    status=1
    return 0
  fi
  [ "$limit" -le "$left" ] || limit=$left
  echo "=== $name ($(date +%T), limit ${limit} s)"
  local start=$SECONDS
  timeout "$limit" "$@" > "$work/$name.log" 2>&1
  local rc=$?
  # Each stage's wall time and exit status: what the next session orders the stages by.
  printf '%s\t%d\t%d\t%d\n' "$name" "$((SECONDS - start))" "$limit" "$rc" >> "$work/stages.tsv"
  tail -n 40 "$work/$name.log"
  [ $rc -eq 0 ] || { echo "=== $name FAILED (exit $rc)"; status=1; }
  bundle   # after every stage: a call killed later still brings these back
  return 0
}

{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; which cmake g++ ninja; \
  python3 -c 'import torch; print(torch.__version__, torch.version.cuda)'; } > "$work/machine.txt" 2>&1
cat "$work/machine.txt"

# Only what this script runs: the CPU test binaries would double the build.
export ACCUMBENCH_TARGET=accumbench,accumbench_gpu_tests,tracer_overhead
stage build 240 scripts/build.sh -DACCUMBENCH_GPU_TESTS=ON -DACCUMBENCH_REFERENCE_PYTHON="$(command -v python3)"
unset ACCUMBENCH_TARGET
[ -x build/accumbench ] || { echo "no build/accumbench: stopping"; exit 1; }

stage anchor-eager 120 python3 "$anchor" --preset gpt2-124m --seq-len 1024 --batch 64 --micro-batches "$micro"
grep '^{' "$work/anchor-eager.log" > "$work/anchor-eager.jsonl"
stage accumbench 150 build/accumbench sweep --hf-config bench/gpt2-124m-50304.json --seq-len 1024 --batch 64 \
  --micro-batches "$micro" --device cuda --precision bf16 --cuda-graphs \
  --json "$work/accumbench.json" --html "$work/report.html"
stage side-by-side 30 python3 bench/side_by_side.py "$work/accumbench.json" "$work/anchor-eager.jsonl"
cp "$work/side-by-side.log" "$out/side-by-side.md"
stage gpu-tests 120 build/accumbench_gpu_tests --gtest_color=no

# The reference: cross-check first (CPU tensors, PyTorch 2.x), then the GPU side by side. The
# export only gives step_bench.py the model's shape; its ~1 GB of weights stay outside $OUT.
stage reference-check 90 sh -c 'cd build && ctest -j 8 -R "^reference\." --output-on-failure'
ref_export=$(mktemp -d)
stage reference-export 60 build/accumbench verify --hf-config bench/gpt2-124m-50304.json --seq-len 8 --batch 1 \
  --device cpu --export "$ref_export"
stage reference-gpu 150 python3 bench/reference/step_bench.py --export "$ref_export" --seq-len 1024 --batch 64 \
  --micro-batches "$micro" --device cuda --precision bf16 --attention sdpa
grep '^{' "$work/reference-gpu.log" > "$work/reference-gpu.jsonl"
stage side-by-side-reference 30 python3 bench/side_by_side.py "$work/accumbench.json" "$work/reference-gpu.jsonl"
cp "$work/side-by-side-reference.log" "$out/side-by-side-reference.md"
# A Python framework's host time per micro-step on this GPU (plain, hf-trl and, where transformers
# imports, transformers' own model against the engine; it prints the packages it found): the cache
# file comes back in the bundle.
ACCUMBENCH_CACHE_DIR="$work/cache" stage calibrate-framework 180 build/accumbench calibrate-framework \
  --hf-config bench/gpt2-124m-50304.json --seq-len 1024 --batch 16 --micro-batches 1,2,4,8,16 --device cuda \
  --precision bf16 --steps 3 --python "$(command -v python3)"
# Issue 18's memory on the GPU: TRL's step (hf-trl, loss_type chunked_nll and nll) and transformers'
# own model with PEFT's LoRA, against the plan of the same shape (GPT-2 124M, T=1024, batch 16).
hf_splits=1,4,16
for loss in chunked_nll nll; do
  stage "reference-hf-trl-$loss" 90 python3 bench/reference/step_bench.py --export "$ref_export" --seq-len 1024 \
    --batch 16 --micro-batches "$hf_splits" --device cuda --precision bf16 --attention sdpa --steps 2 \
    --framework hf-trl --trl-loss "$loss"
  grep '^{' "$work/reference-hf-trl-$loss.log" > "$work/reference-hf-trl-$loss.jsonl"
  stage "plan-hf-trl-$loss" 30 build/accumbench plan --hf-config bench/gpt2-124m-50304.json --seq-len 1024 --batch 16 \
    --micro-batches "$hf_splits" --device cuda --precision bf16 --framework hf-trl --trl-loss "$loss" --detail off \
    --json "$work/plan-hf-trl-$loss.json"
done
stage plan-plain 30 build/accumbench plan --hf-config bench/gpt2-124m-50304.json --seq-len 1024 --batch 64 \
  --micro-batches "$micro" --device cuda --precision bf16 --detail off --json "$work/plan-plain.json"
# torch.optim.AdamW's foreach kernels (--optimizer adamw-foreach) against the fused one, where the
# optimizer step holds the peak (T=128, one sequence): PyTorch's own step, accumbench's and the plan.
for kernel in adamw adamw-foreach; do
  stage "reference-$kernel" 60 python3 bench/reference/step_bench.py --export "$ref_export" --seq-len 128 --batch 1 \
    --micro-batches 1 --device cuda --precision bf16 --attention sdpa --steps 2 --optimizer "$kernel"
  grep '^{' "$work/reference-$kernel.log" > "$work/reference-$kernel.jsonl"
  stage "plan-$kernel" 30 build/accumbench plan --hf-config bench/gpt2-124m-50304.json --seq-len 128 --batch 1 \
    --micro-batches 1 --device cuda --precision bf16 --optimizer "$kernel" --detail off --json "$work/plan-$kernel.json"
  stage "sweep-$kernel" 60 build/accumbench sweep --hf-config bench/gpt2-124m-50304.json --seq-len 128 --batch 1 \
    --micro-batches 1 --device cuda --precision bf16 --optimizer "$kernel" --warmup 1 --steps 3 --time-budget 0 \
    --json "$work/sweep-$kernel.json"
done
stage plan-vs-reference 30 python3 bench/plan_vs_reference.py --bar 0 \
  "adamw=$work/reference-adamw.jsonl,$work/plan-adamw.json" \
  "adamw-foreach=$work/reference-adamw-foreach.jsonl,$work/plan-adamw-foreach.json" \
  "plain=$work/reference-gpu.jsonl,$work/plan-plain.json" \
  "chunked_nll=$work/reference-hf-trl-chunked_nll.jsonl,$work/plan-hf-trl-chunked_nll.json" \
  "nll=$work/reference-hf-trl-nll.jsonl,$work/plan-hf-trl-nll.json"
cp "$work/plan-vs-reference.log" "$out/plan-vs-reference.md"
stage hf-real-lora 90 python3 bench/reference/hf_real_step.py --export "$ref_export" --seq-len 1024 --batch 16 \
  --micro-batches "$hf_splits" --device cuda --precision bf16 --steps 2 --lora-rank 16 --lora-alpha 32
rm -rf "$ref_export"

# The job that motivated the tool (issue 13): Qwen3-1.7B, fp16 weights, LoRA r16 alpha 32 on every
# linear, fp16 autocast, checkpointing, T=512, at effective batch 4 and 16.
for lora_batch in 4 16; do
  stage "lora-qwen3-1.7b-b$lora_batch" 90 build/accumbench sweep --model qwen3-1.7b --seq-len 512 --batch "$lora_batch" \
    --device cuda --precision fp16 --weights-dtype fp16 --lora-rank 16 --lora-alpha 32 --activation-checkpointing blocks \
    --warmup 2 --steps 5 --json "$work/lora-qwen3-b$lora_batch.json"
done
# The same job in transformers' own Qwen3 with PEFT's LoRA (where they import): step time and peak
# per split beside the engine's batch-4 sweep above.
qwen_index=$(mktemp -d)
build/accumbench models --index qwen3-1.7b > "$qwen_index/index.json"
stage hf-real-qwen3-lora-b4 120 python3 bench/reference/hf_real_step.py --export "$qwen_index" --seq-len 512 --batch 4 \
  --micro-batches 1,2,4 --device cuda --precision fp16 --weights-dtype fp16 --lora-rank 16 --lora-alpha 32 \
  --gradient-checkpointing --warmup 1 --steps 3
rm -rf "$qwen_index"
# The host time per micro-step of that job (PEFT's adapters and checkpointing's second forward in
# Python), calibrated as such: the entry a sweep of it reads (the TRL run behind the seed's numbers
# lost about 160 ms per extra micro-step on a T4).
ACCUMBENCH_CACHE_DIR="$work/cache" stage calibrate-qwen3-lora 150 build/accumbench calibrate-framework \
  --model qwen3-1.7b --seq-len 512 --batch 4 --micro-batches 1,2,4 --device cuda --precision fp16 \
  --weights-dtype fp16 --lora-rank 16 --lora-alpha 32 --activation-checkpointing blocks --steps 3 \
  --python "$(command -v python3)"
# Real data (issue 14): chat lengths, per-micro-batch padding against bfd packing through the
# variable-length flash kernel (its no-leak test is PackedDocuments.* in gpu-tests above).
for layout in "--padding longest" "--packing bfd"; do
  stage "real-data-${layout##* }" 60 build/accumbench sweep --model gpt2-124m --seq-len 1024 --batch 32 \
    --lengths docs/examples/chat_lengths.txt $layout --device cuda --precision bf16 --time-budget 10 \
    --json "$work/real-data-${layout##* }.json"
done
traces=$(mktemp -d)   # large: outside $OUT, only the two 64×1 traces come back (gzip)
stage profile-ours 120 build/accumbench sweep --hf-config bench/gpt2-124m-50304.json --seq-len 1024 --batch 64 \
  --micro-batches 1,64 --device cuda --precision bf16 --warmup 2 --steps 3 --profile "$traces" \
  --json "$work/profiled.json"
profile_pair() {  # the reference's trace of one split, and the kernel-by-kernel difference
  local mb=$1
  stage "profile-anchor-$mb" 90 python3 bench/anchor_profile.py --micro-batch "$mb" --trace "$traces/anchor-${mb}.trace.json"
  stage "kernel-diff-$mb" 60 python3 bench/kernel_diff.py "$traces/${mb}x$((64 / mb))-bf16.trace.json" \
    "$traces/anchor-${mb}.trace.json" --top 30
}
profile_pair 64
stage chunked 120 build/accumbench sweep --hf-config bench/gpt2-124m-50304.json --seq-len 1024 --batch 64 \
  --micro-batches 8,64 --device cuda --precision bf16 --chunked-loss --json "$work/chunked.json"
stage side-by-side-chunked 30 python3 bench/side_by_side.py "$work/chunked.json" "$work/anchor-eager.jsonl"
# --weights-dtype as a list on CUDA (session 29): the model cast between splits, each split's peak
# read after an emptied cache; a split's peaks should equal a sweep of its dtype alone.
stage weights-list 60 build/accumbench sweep --model gpt2-124m --seq-len 512 --batch 8 --micro-batches 1,8 \
  --device cuda --precision bf16 --weights-dtype fp32,bf16 --warmup 1 --steps 3 --time-budget 0 --json "$work/weights-list.json"
stage weights-bf16-alone 40 build/accumbench sweep --model gpt2-124m --seq-len 512 --batch 8 --micro-batches 1,8 \
  --device cuda --precision bf16 --weights-dtype bf16 --warmup 1 --steps 3 --time-budget 0 --json "$work/weights-bf16.json"
stage weights-compare 20 python3 -c '
import json, sys
both = {r["config"]["micro_batch"]: r for r in json.load(open(sys.argv[1]))["runs"] if r["config"]["weights_dtype"] == "bf16"}
for r in json.load(open(sys.argv[2]))["runs"]:
    b = both[r["config"]["micro_batch"]]
    print(r["config"]["micro_batch"], "alone", r["peak_allocated_bytes"], r["peak_reserved_bytes"],
          "in the list", b["peak_allocated_bytes"], b["peak_reserved_bytes"])
' "$work/weights-list.json" "$work/weights-bf16.json"
# --max-grad-norm (sessions 38, 40): the clipping's pass in the optimizer phase on the H200, each
# split without and with it in one sweep (a list: paired rounds; the opt column and the step time
# tell its cost, the plan column its memory).
stage clip-list 60 build/accumbench sweep --model gpt2-124m --seq-len 512 --batch 8 --micro-batches 8 \
  --device cuda --precision bf16 --warmup 1 --steps 10 --time-budget 0 --max-grad-norm 0,1 --json "$work/clip-list.json"
# The chunked head over counted rows (session 39): on samples it gathers the rows whose target
# counts (a stable sort and index_select / index_copy_ on the device); with longest padding on chat
# lengths and on prompt-completion rows (40 % counted) beside the plain head, time and peak
# against the plan.
stage chunked-gathered-chat 60 build/accumbench sweep --model gpt2-124m --seq-len 1024 --batch 32 --micro-batches 8,32 \
  --lengths docs/examples/chat_lengths.txt --padding longest --device cuda --precision bf16 --chunked-loss \
  --warmup 1 --steps 5 --time-budget 0 --json "$work/chunked-gathered-chat.json"
stage chunked-gathered-masked 60 build/accumbench sweep --model gpt2-124m --seq-len 64 --batch 8 --micro-batches 2,8 \
  --lengths tests/data/lengths/prompt_completion.jsonl --padding longest --device cuda --precision bf16 --chunked-loss \
  --warmup 1 --steps 5 --time-budget 0 --json "$work/chunked-gathered-masked.json"
# --padding as a list (session 41): the README's chat-lengths question on the GPU, where a
# micro-batch of one underuses the device: every split padded to T and to its longest sample in one
# sweep (paired rounds), the recommendation choosing among both.
stage padding-list 90 build/accumbench sweep --model gpt2-124m --seq-len 1024 --batch 32 --micro-batches 1,4,8,32 \
  --lengths docs/examples/chat_lengths.txt --padding max,longest --device cuda --precision bf16 \
  --warmup 1 --steps 5 --time-budget 0 --json "$work/padding-list.json"
# --packing as a list (session 46): longest padding against bfd packing (the variable-length flash
# kernel) in one sweep of paired rounds, compared per real token, over a whole epoch of the file
# (--distinct-steps epoch, session 47: 16 unpacked steps at batch 32, every split timed on each).
stage packing-list 120 build/accumbench sweep --model gpt2-124m --seq-len 1024 --batch 32 --micro-batches 1,4,8,32 \
  --lengths docs/examples/chat_lengths.txt --padding longest --packing none,bfd --distinct-steps epoch --device cuda \
  --precision bf16 --warmup 1 --steps 16 --time-budget 0 --json "$work/packing-list.json"
# --group-by-length as a list (session 48): both orders of the chat lengths over one epoch, longest
# padding, compared per real token (the README's CPU sweep of the same question).
stage grouping-list 90 build/accumbench sweep --model gpt2-124m --seq-len 1024 --batch 32 --micro-batches 1,8,32 \
  --lengths docs/examples/chat_lengths.txt --padding longest --group-by-length false,true --distinct-steps epoch \
  --device cuda --precision bf16 --warmup 1 --steps 16 --time-budget 0 --json "$work/grouping-list.json"
stage tracer-overhead 90 build/tracer_overhead --device cuda --model gpt2-124m --seq-len 1024 --batch 8 --micro-batch 8
stage anchor-compile 150 python3 "$anchor" --preset gpt2-124m --seq-len 1024 --batch 64 --micro-batches 64 --compile
grep '^{' "$work/anchor-compile.log" > "$work/anchor-compile.jsonl"
stage side-by-side-compiled 30 python3 bench/side_by_side.py "$work/accumbench.json" "$work/anchor-eager.jsonl" \
  "$work/anchor-compile.jsonl"
cp "$work/side-by-side-compiled.log" "$out/side-by-side.md"
profile_pair 1

# The traces are large: keep the two 64×1 ones whole (gzip) next to the bundle.
gzip -c "$traces/64x1-bf16.trace.json" > "$out/ours-64x1.trace.json.gz" 2>/dev/null
gzip -c "$traces/anchor-64.trace.json" > "$out/anchor-64x1.trace.json.gz" 2>/dev/null
rm -rf "$traces"
exit $status
