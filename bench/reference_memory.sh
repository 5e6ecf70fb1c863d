#!/bin/sh
# The plan against the PyTorch reference's measured peaks on one shape, in the three modes:
# plain, hf-trl with TRL's loss_type nll, and chunked_nll (bench/reference/step_bench.py; on the
# CPU the profiler's allocation events). One line per mode and split (bench/plan_vs_reference.py).
#   bench/reference_memory.sh CONFIG T BATCH SPLITS PRECISION [verify options, e.g. --lora-rank 8]
#   (CONFIG: a config.json, or a preset name such as gpt2-tiny)
#   bench/reference_memory.sh bench/shapes/gpt2-d512-v4096.json 160 4 4,1 bf16
#   (with --activation-checkpointing blocks the reference checkpoints every block as well)
# Needs build/accumbench and a Python that imports torch (PYTHON, default /usr/bin/python3).
set -eu
config=$1 T=$2 B=$3 splits=$4 precision=$5
shift 5
# --activation-checkpointing blocks in the options: the reference checkpoints every block too.
ref_ckpt=""
case " $* " in *" --activation-checkpointing blocks "*) ref_ckpt="--gradient-checkpointing" ;; esac
root=$(cd "$(dirname "$0")/.." && pwd)
model="--hf-config $config"
[ -f "$config" ] || model="--model $config"
py=${PYTHON:-/usr/bin/python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck disable=SC2068,SC2086  # the remaining options and $model are words
"$root/build/accumbench" verify $model --seq-len 8 --batch 1 --threads 1 $@ --export "$work/export" > /dev/null
cases=""
for mode in plain nll chunked_nll; do
  framework=hf-trl trl="--trl-loss $mode"
  [ "$mode" = plain ] && framework=plain trl=""
  # shellcheck disable=SC2086
  "$py" "$root/bench/reference/step_bench.py" --export "$work/export" --seq-len "$T" --batch "$B" --micro-batches "$splits" \
    --threads 1 --steps 1 --precision "$precision" --framework "$framework" $trl $ref_ckpt > "$work/$mode.jsonl"
  # shellcheck disable=SC2068,SC2086
  "$root/build/accumbench" plan $model --seq-len "$T" --batch "$B" --micro-batches "$splits" \
    --precision "$precision" --device cpu --framework "$framework" $trl $@ --detail off --json "$work/$mode.plan.json" > /dev/null 2> "$work/plan.err" || { cat "$work/plan.err"; exit 1; }
  cases="$cases $mode=$work/$mode.jsonl,$work/$mode.plan.json"
done
# shellcheck disable=SC2086
"$py" "$root/bench/plan_vs_reference.py" $cases
