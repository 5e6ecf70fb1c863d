#!/usr/bin/env bash
# accumbench against the PyTorch reference (bench/reference/), same shapes, same CPU, one call:
#   bench/cpu_side_by_side.sh [RESULT.md]      (default bench/results/cpu-side-by-side-<date>.md)
# For each shape: `verify --export` at a toy batch gives the reference the model's exact shape,
# `sweep` measures accumbench, bench/reference/step_bench.py the reference (Debian's python3-torch
# via /usr/bin/python3, or PYTHON=...), then bench/cpu_side_by_side.py prints the table and fits.
# Shapes (SHAPES="model:T:batch:micro-batches ..."): gpt2-124m at T=256, batch 8, and smollm2-135m
# (the Llama family) at T=128, batch 8, micro-batches 1, 2, 8, one warm-up and two timed steps
# (WARMUP, STEPS): about 12 CPU minutes on 2 cores (26 minutes of wall time when 4 people shared
# the machine on 2026-11-30). The host overhead per micro-step is milliseconds, below the noise of
# these 20-50 s CPU steps; tiny shapes measure it:
#   SHAPES="gpt2-tiny:64:8:1,2,4,8 llama-tiny:64:8:1,2,4,8" STEPS=20 bench/cpu_side_by_side.sh FILE.md
# JOB="--lora-rank 8 --activation-checkpointing blocks" runs another job on both sides (any of
# --lora-rank/--lora-alpha/--lora-targets/--lora-dropout, --weights-dtype, --precision,
# --activation-checkpointing blocks): the export carries the adapters, the reference checkpoints
# every block and stores the base in the same dtype.
set -euo pipefail
# Spinning OpenMP threads slow LibTorch CPU steps 2.5-4x on a shared machine (cpu_runtime.hpp): both sides wait passively.
export OMP_WAIT_POLICY=PASSIVE
cd "$(dirname "$0")/.."
bin=${ACCUMBENCH:-build/accumbench}
py=${PYTHON:-/usr/bin/python3}
threads=${THREADS:-2}
# OpenBLAS (Debian's pthread build) keeps its own pool of every core whatever torch.set_num_threads
# says; accumbench sets it to --threads, so the reference's is set alike.
export OPENBLAS_NUM_THREADS=$threads
warmup=${WARMUP:-1}
steps=${STEPS:-2}   # tiny shapes (host overhead in ms) need more: STEPS=20
shapes=${SHAPES:-"gpt2-124m:256:8:1,2,8 smollm2-135m:128:8:1,2,8"}
job=${JOB:-}
result=${1:-bench/results/cpu-side-by-side-$(date -u +%F).md}
# What the reference takes of JOB (the adapters come with the export).
reference_job=""
read -r -a job_words <<< "$job"
for ((i = 0; i < ${#job_words[@]}; i++)); do
  case ${job_words[i]} in
    --weights-dtype | --precision) reference_job+=" ${job_words[i]} ${job_words[i + 1]}" ;;
    --activation-checkpointing) [ "${job_words[i + 1]}" = blocks ] && reference_job+=" --gradient-checkpointing" ;;
  esac
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$(dirname "$result")"
{
  echo "# accumbench vs the PyTorch reference on the CPU ($(date -u +%FT%TZ))"
  echo
  echo "\`bench/cpu_side_by_side.sh\` on $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'))," \
       "$threads threads per side, $warmup warm-up and $steps timed steps per split (median)${job:+; job: $job}."
  echo "Reference peak: bytes alive before the step + the highest running sum of the profiler's allocation events;"
  echo "accumbench peak: its counting CPU allocator. Ratios are accumbench / reference."
  echo
} > "$work/result.md"
for shape in $shapes; do
  IFS=: read -r model seq batch micro <<< "$shape"
  echo "== $model T=$seq batch $batch micro-batches $micro" >&2
  # shellcheck disable=SC2086  # JOB's words
  "$bin" verify --model "$model" --seq-len 8 --batch 1 --threads "$threads" $job --export "$work/$model" > /dev/null
  # shellcheck disable=SC2086
  "$bin" sweep --model "$model" --seq-len "$seq" --batch "$batch" --micro-batches "$micro" $job \
    --device cpu --threads "$threads" --warmup "$warmup" --steps "$steps" --json "$work/$model.json" > /dev/null
  # shellcheck disable=SC2086
  "$py" bench/reference/step_bench.py --export "$work/$model" --seq-len "$seq" --batch "$batch" $reference_job \
    --micro-batches "$micro" --warmup "$warmup" --steps "$steps" --threads "$threads" > "$work/$model.jsonl"
  rm -rf "${work:?}/$model"   # the exported weights and gradients: only index.json was needed
  "$py" bench/cpu_side_by_side.py "$work/$model.json" "$work/$model.jsonl" >> "$work/result.md"
  mkdir -p "${result%.md}" && cp "$work/$model.json" "$work/$model.jsonl" "${result%.md}/"   # the raw data
  echo >> "$work/result.md"
done
cp "$work/result.md" "$result"
cat "$result"
