#!/bin/sh
# accumbench plan --framework plain and hf-trl against the PyTorch reference's measured peaks
# (bench/reference/step_bench.py: on the CPU the profiler's allocation events over a step; plain
# and the HF Trainer + TRL SFTTrainer step of bench/reference/hf_trl.py). A GPT-2 shape with an
# 8192-token vocabulary, so that the loss head and TRL's metrics on the logits decide the peak;
# fp32, T=64, batch 4, splits 4×1 and 1×4. Every predicted peak must lie within 3 % of the
# measured one, and at 4×1 the hf-trl peak must be the higher, measured and predicted.
# Usage: plan_memory.sh ACCUMBENCH PYTHON DATA_DIR WORK_DIR. Exit 77 when PYTHON cannot import torch.
set -u
bin=$1 py=$2 data=$3 work=$4
here=$(cd "$(dirname "$0")" && pwd)
bench="$here/../../bench/reference/step_bench.py"
config="$data/gpt2-wide-vocab.json"

if ! "$py" -c "import torch" 2>/dev/null; then
  echo "SKIP: $py cannot import torch; install python3-torch (scripts/install-deps.sh)"
  exit 77
fi
rm -rf "$work" && mkdir -p "$work" || exit 1
"$bin" verify --hf-config "$config" --seq-len 8 --batch 1 --threads 1 --export "$work/export" > "$work/verify.txt" 2>&1 ||
  { cat "$work/verify.txt"; echo "accumbench verify --export failed"; exit 1; }
for framework in plain hf-trl; do
  "$py" "$bench" --export "$work/export" --seq-len 64 --batch 4 --micro-batches 4,1 --threads 1 --steps 1 \
    --framework "$framework" > "$work/$framework.jsonl" 2> "$work/$framework.err" ||
    { cat "$work/$framework.err"; echo "step_bench.py --framework $framework failed"; exit 1; }
  "$bin" plan --hf-config "$config" --seq-len 64 --batch 4 --micro-batches 4,1 --precision fp32 --device cpu \
    --framework "$framework" --detail off --json "$work/$framework.plan.json" > /dev/null 2>&1 ||
    { echo "accumbench plan --framework $framework failed"; exit 1; }
done
"$py" - "$work" <<'PY'
import json, sys
work = sys.argv[1]
bad = []
peaks = {}
print(f"{'framework':9} {'split':5} {'measured':>12} {'predicted':>12} {'error':>8}")
for framework in ("plain", "hf-trl"):
    rows = [json.loads(line) for line in open(f"{work}/{framework}.jsonl")][1:]
    plans = {s["split"]: s for s in json.load(open(f"{work}/{framework}.plan.json"))["splits"]}
    for row in rows:
        split = f"{row['mb']}×{row['ga']}"
        measured, predicted = row["peak_bytes"], plans[split]["peak_bytes"]
        error = (predicted - measured) / measured
        peaks[(framework, split)] = (measured, predicted)
        print(f"{framework:9} {split:5} {measured:12d} {predicted:12d} {100 * error:+7.2f}%")
        if abs(error) > 0.03:
            bad.append(f"{framework} {split}: predicted {predicted} against measured {measured} ({100 * error:+.2f} %)")
for side, index in (("measured", 0), ("predicted", 1)):
    if not peaks[("hf-trl", "4×1")][index] > peaks[("plain", "4×1")][index]:
        bad.append(f"at 4×1 the {side} hf-trl peak is not above plain's")
for line in bad:
    print("FAIL:", line)
sys.exit(1 if bad else 0)
PY
status=$?
[ $status -eq 0 ] && rm -rf "$work"
exit $status
