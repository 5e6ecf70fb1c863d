#!/usr/bin/env bash
# CLI cases that run one command and check its output or files beyond fixed strings; one ctest
# case per mode (tests/cli/CMakeLists.txt).
#
#   tests/cli/command_checks.sh BINARY DATA_DIR CLI_DIR CASE MODE
# shellcheck disable=SC2317  # the mode functions are called as "$mode"
source "$(dirname "$0")/lib.sh"
cli_init "$@"

# cli.models.lists_presets: the table's columns hold the numbers the other cases rely on.
models() {
  expect 0 "gpt2-124m" -- models
  local tiny_vocab tiny_max_t
  tiny_vocab=$(awk 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i } $1 == "gpt2-tiny" { print $col["vocab"] }' "$out")
  tiny_max_t=$(awk 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i } $1 == "gpt2-tiny" { print $col["max_T"] }' "$out")
  check "models gives gpt2-124m 124439808 parameters" \
    grep -qE '^gpt2-124m[[:space:]].*[[:space:]]124439808[[:space:]]' "$out"
  check "models gives gpt2-tiny vocab 512 and 256 positions (user_errors.tsv and make_inputs.py use them)" \
    test "${tiny_vocab:-}" = 512 -a "${tiny_max_t:-}" = 256
  # --index: the shape alone, as verify --export's index.json holds it (what step_bench.py reads).
  expect 0 '"model"' -- models --index gpt2-tiny
  check "models --index gpt2-tiny is index.json's model: the table's numbers, the same keys as an export" py '
import json
m = json.load(open(sys.argv[1]))["model"]
want = dict(name="gpt2-tiny", arch="gpt2", vocab_size=512, max_seq_len=256, n_layers=2, d_model=64)
for k, v in want.items():
    if m.get(k) != v: fail("%s: %r, not %r" % (k, m.get(k), v))
for k in ("n_heads", "n_kv_heads", "head_dim", "d_ff", "norm_eps", "rope_theta", "tied_embeddings", "qkv_bias", "o_bias", "mlp_bias", "qk_norm"):
    if k not in m: fail("no %s" % k)
' "$out"
}

# cli.sweep.knobs: the flag reaches the grid and every point runs. The grid's exact shape is
# SweepGrid.KnobsCheckpointEverySplitAndPutTheOptimizerInBackwardWithoutAccumulation.
knobs() {
  tiny_args --knobs --json "$work/knobs.json"
  expect 0 "Recommendation:" -- sweep "${args[@]}"
  check "--knobs: every run ok, with checkpointed and optimizer-in-backward runs" py '
runs = load(sys.argv[1])["runs"]
if any(r["status"] != "ok" for r in runs): fail("a run failed")
if not any(r["config"]["activation_checkpointing"] == "blocks" for r in runs): fail("no checkpointed run")
if not any(r["config"]["optimizer_in_backward"] for r in runs): fail("no optimizer-in-backward run")
' "$work/knobs.json"
}

# cli.sweep.grouping_note_of_equal_lengths: samples all of one length make the same steps in
# either order, so no note says the comparison leans toward grouping (it does with skewed.txt,
# commands.tsv's sweep.grouping_list).
grouping_equal_lengths() {
  local i
  for ((i = 0; i < 40; i++)); do echo 20; done >"$work/equal.txt"
  tiny_args --lengths "$work/equal.txt" --padding longest --group-by-length false,true --steps 1
  expect 0 "Recommendation:" -- sweep "${args[@]}"
  check "no leaning note where every sample is 20 tokens" bash -c '! grep -q "the orders are compared on" "$1" "$2"' _ "$out" "$err"
}

# cli.sweep.precisions
precisions() {
  tiny_args --micro-batches 4 --precision fp32,bf16
  expect 0 "Recommendation:" -- sweep "${args[@]}"
  check "each console row of a precision sweep names its precision" py '
rows = split_rows(sys.argv[1])
if len(rows) != 2: fail("%d rows" % len(rows))
for row, p in zip(rows, ("fp32", "bf16")):
    if p not in row: fail("row does not say %s: %s" % (p, row))
' "$out"
}

# cli.sweep.chunked_loss: the flag reaches the options, the console, the JSON and the CSV. Which
# runs, their peaks and the plan's accuracy are ChunkedLossSweep.* in test_sweep.cpp.
chunked_loss() {
  tiny_args --chunked-loss --json "$work/chunked.json" --csv "$work/chunked.csv"
  expect 0 "4×1 chunked-ce" "Recommendation:" -- sweep "${args[@]}"
  check "--chunked-loss: every run ok, the context options say chunked_loss" py '
d = load(sys.argv[1])
if any(r["status"] != "ok" for r in d["runs"]): fail("a run failed")
if dict(d["context"]["options"]).get("chunked_loss") != "true": fail("context options do not say chunked_loss")
' "$work/chunked.json"
  check "the CSV has a chunked_loss column: every split plain, then chunked" py '
rows = list(csv.DictReader(open(sys.argv[1], encoding="utf-8")))
if [r["chunked_loss"] for r in rows] != ["false", "true"] * 3: fail("chunked_loss column %s" % [r["chunked_loss"] for r in rows])
' "$work/chunked.csv"
}

# cli.sweep.token_file (the file comes from the cli_inputs fixture)
token_file() {
  tiny_args --micro-batches 4 --tokens "$inputs/good.u32" --token-bytes 4 --json "$work/tokens.json"
  expect 0 "Recommendation:" -- sweep "${args[@]}"
  check "the context names the token file" py '
opts = dict(load(sys.argv[1])["context"]["options"])
if opts.get("token_file") != sys.argv[2]: fail("token_file %r" % opts.get("token_file"))
' "$work/tokens.json" "$inputs/good.u32"
}

# cli.help.defaults_are_used: help prints the defaults, and they are what sweep uses.
help_defaults() {
  expect 0 "--memory-limit" "--knobs" "--resume" -- sweep --help
  local help_seq_len help_batch
  help_seq_len=$(grep -oE -- '--seq-len INT=[0-9]+' "$out" | grep -oE '[0-9]+$')
  help_batch=$(grep -oE -- '--batch INT=[0-9]+' "$out" | grep -oE '[0-9]+$')
  if [ -z "$help_seq_len" ] || [ -z "$help_batch" ]; then
    fail "help prints no \"--seq-len INT=N\" or \"--batch INT=N\""
  fi
  # Leave --seq-len and --batch out: the run must use the defaults that the help printed.
  expect 0 -- sweep --model gpt2-tiny --device cpu --threads 1 \
    --warmup 1 --steps 1 --micro-batches "$help_batch" --json "$work/defaults.json"
  check "help's defaults (--seq-len $help_seq_len, --batch $help_batch) are what sweep uses" py '
c = load(sys.argv[1])["context"]
if (c["seq_len"], c["batch"]) != (int(sys.argv[2]), int(sys.argv[3])):
    fail("sweep used seq_len %s batch %s" % (c["seq_len"], c["batch"]))
' "$work/defaults.json" "$help_seq_len" "$help_batch"
}

# cli.verify.token_normalization
verify_token() {
  expect 0 "PASS" -- verify --model gpt2-tiny --batch 4 --seq-len 32 --lengths variable --device cpu --threads 1
  check "verify: every split passes" py '
rows = split_rows(sys.argv[1])
if len(rows) != 3 or not all(r.endswith("PASS") for r in rows): fail("rows %s" % rows)
' "$out"
}

# cli.verify.chunked_loss
verify_chunked() {
  expect 0 "PASS: every split" -- \
    verify --model gpt2-tiny --batch 4 --seq-len 32 --lengths variable --device cpu --threads 1 --chunked-loss
  check "verify --chunked-loss: each split plain, then with the chunked loss, all passing" py '
rows = split_rows(sys.argv[1])
if len(rows) != 6 or not all(r.endswith("PASS") for r in rows): fail("rows %s" % rows)
if [r.split()[1] == "chunked-ce" for r in rows] != [False, True] * 3: fail("rows %s" % rows)
' "$out"
}

# cli.verify.optimizer_in_backward
verify_oib() {
  expect 0 "PASS" -- verify --model gpt2-tiny --batch 4 --seq-len 32 --device cpu --threads 1 --optimizer-in-backward
  check "verify: the optimizer-in-backward row passes" grep -qE '^[0-9]+×[0-9]+ oib .*PASS$' "$out"
}

# cli.plan.chunked_loss
plan_chunked() {
  expect 0 "one chunk's logits, fp32" "with the chunked loss:" -- \
    plan --model gpt2-124m --seq-len 1024 --batch 64 --precision bf16 --attention flash --memory 32GiB --chunked-loss
  check "plan --chunked-loss: every split plain and chunked; the chunked 64×1 fits 32 GiB, the plain does not" py '
rows = {" ".join(r.split()[:2]) if "chunked-ce" in r else r.split()[0]: r for r in split_rows(sys.argv[1])}
if len(rows) != 14: fail("%d split rows" % len(rows))
# The fits column comes before the four Trainer settings that end each row (loss_type varies here).
if rows["64×1"].split()[-5] != "no" or rows["64×1 chunked-ce"].split()[-5] != "yes": fail("64×1 rows %s" % rows)
if not rows["64×1 chunked-ce"].endswith("loss_type=chunked_nll") or not rows["64×1"].endswith("loss_type=nll"):
    fail("loss_type per row %s" % rows)
' "$out"
}

# cli.plan.calibrate_aligned
plan_calibrate() {
  expect 0 "calibrated (probes" -- \
    plan --calibrate --knobs --chunked-loss --model gpt2-tiny --seq-len 32 --batch 2 --device cpu
  check "plan --calibrate: one line per split (2 micro-batches × knobs × loss heads), the columns aligned" py '
lines = [l for l in open(sys.argv[1], encoding="utf-8") if " analytic " in l]
if len(lines) != 12: fail("%d calibrated lines" % len(lines))
if len({l.index(" analytic ") for l in lines}) != 1: fail("analytic column not aligned:\n" + "".join(lines))
' "$out"
}

# cli.trainer_config.emit_round_trip: what plan --emit trl (and axolotl) prints, read back with
# --trl-config (--axolotl-config), plans the same splits and prints the same settings: stdout of
# the two runs is the same, byte for byte (what was read goes to stderr). A TRL config is planned
# as TRL's step (its loss_type), so the TRL side starts from --framework hf-trl; both trainers clip
# at max_grad_norm 1 unless the file says otherwise, so both sides start from --max-grad-norm 1.
emit_round_trip() {
  local format option framework
  for format in trl axolotl; do
    option=--$format-config
    framework=()
    # axolotl's bf16: true loads the weights in bf16 too (resolve_dtype): its job has bf16 weights.
    [ "$format" = trl ] && framework=(--framework hf-trl) || framework=(--weights-dtype bf16)
    expect 0 "# split" -- plan --model gpt2-tiny --seq-len 32 --batch 8 --precision bf16 "${framework[@]}" \
      --activation-checkpointing blocks --lora-rank 4 --lora-alpha 8 --lora-targets attention --max-grad-norm 1 \
      --device cpu --emit "$format"
    cp "$out" "$work/first.txt"
    sed -n '/^# TRL SFTConfig\|^# axolotl/,$p' "$out" >"$work/emitted.yaml"
    check "--emit $format printed settings" test -s "$work/emitted.yaml"
    expect 0 "read $work/emitted.yaml as" -- plan --model gpt2-tiny "$option" "$work/emitted.yaml" --device cpu \
      --emit "$format"
    check "--emit $format read back with $option: the same plan and settings" diff "$work/first.txt" "$out"
  done
}

# cli.plan.outputs: plan --markdown / --json / --html hold the split table the console prints:
# the same splits, peaks and fits, with exact Markdown rows.
plan_outputs() {
  expect 0 "splits of batch 4" -- plan --model gpt2-tiny --seq-len 32 --batch 4 --device cpu --memory-limit 1GiB \
    --headroom 10% --markdown "$work/plan.md" --json "$work/plan.json" --html "$work/plan.html"
  check "the Markdown table: header, and the row of 4×1 as the console prints its peak" py '
md = open(sys.argv[1], encoding="utf-8").read().splitlines()
console = open(sys.argv[2], encoding="utf-8").read()
head = "| split | forward | backward | optimizer | peak | held by | spare | fits | per_device_train_batch_size | gradient_accumulation_steps | gradient_checkpointing |"
if md[2] != head: fail("header %r" % md[2])
row = [l for l in md if l.startswith("| 4×1 |")]
if len(row) != 1: fail("no 4×1 row")
cells = [c.strip() for c in row[0].strip("|").split("|")]
line = [l for l in console.splitlines() if l.startswith("4×1 ")][0].split()
if cells[4] != " ".join(line[7:9]): fail("peak %s vs console %s" % (cells[4], line))
if cells[7] != "yes" or cells[8:] != ["4", "1", "false"]: fail("cells %s" % cells)
if "1.00 GiB less headroom 102.4 MiB" not in md[0]: fail(md[0])
' "$work/plan.md" "$out"
  check "the JSON: 3 splits, spare = usable - peak, the HTML embeds the same JSON" py '
j = load(sys.argv[1])
if [s["split"] for s in j["splits"]] != ["1×4", "2×2", "4×1"]: fail("splits %s" % j["splits"])
usable = j["context"]["usable_bytes"]
if usable != 1073741824 - 107374182: fail("usable %s" % usable)
for s in j["splits"]:
    if s["spare_bytes"] != usable - s["peak_bytes"] or s["fits"] is not True: fail("split %s" % s)
page = open(sys.argv[2], encoding="utf-8").read()
start = page.index("id=\"accumbench-plan\">") + len("id=\"accumbench-plan\">")
if json.loads(page[start:page.index("</script>", start)]) != j: fail("the HTML embeds other data")
if j["notes"] != []: fail("notes %r where plan noted nothing" % j["notes"])
' "$work/plan.json" "$work/plan.html"
  # What plan notes on stderr (here an option that changes nothing) is the JSON's notes, in order.
  expect 0 "splits of batch 4" -- plan --model gpt2-tiny --seq-len 32 --batch 4 --device cpu --group-by-length \
    --json "$work/noted.json"
  check "the JSON's notes are stderr's notes" py '
notes = load(sys.argv[1])["notes"]
said = [l[len("accumbench: note: "):] for l in open(sys.argv[2], encoding="utf-8").read().splitlines()
        if l.startswith("accumbench: note: ")]
if not notes or notes != said: fail("notes %r, stderr %r" % (notes, said))
if "--group-by-length" not in notes[0]: fail(notes[0])
' "$work/noted.json" "$err"
  # Both orders are planned once, with the first; the JSON's options name the list, its splits the first.
  expect 0 "its Trainer settings (--emit) are the first order's, --group-by-length true" -- plan --model gpt2-tiny \
    --seq-len 32 --batch 4 --device cpu --lengths "$data/lengths/skewed.txt" --padding longest \
    --group-by-length true,false --json "$work/orders.json"
  check "the JSON names both orders, each split the one planned" py '
j = load(sys.argv[1])
if j["context"]["options"]["group_by_length"] != "true,false": fail("options %r" % j["context"]["options"])
if [s["group_by_length"] for s in j["splits"]] != [True, True, True]: fail("splits %r" % j["splits"])
' "$work/orders.json"
}

# cli.verify.refuses_what_the_host_cannot_hold: the issue's case, verify of qwen2.5-0.5b at T=32
# and batch 2 on a 24 GiB machine, was killed by the out-of-memory killer after 77 s. It needs
# about 32 GiB (VerifyMemory.RefusesWhatTheMachineCannotHold): where less is available it must be
# refused at once with the sentence; on a larger machine the case is skipped.
verify_oom() {
  local available_kib
  available_kib=$(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo)
  if [ -z "$available_kib" ] || [ "$available_kib" -ge $((30 * 1024 * 1024)) ]; then
    skip "${available_kib:-unknown} KiB available: verify of qwen2.5-0.5b fits here"
  fi
  expect 2 "accumbench: error: verify of qwen2.5-0.5b needs about" "of host memory (fp64 copies" \
    "verify a smaller model" -- verify --model qwen2.5-0.5b --seq-len 32 --batch 2 --device cpu --threads 1
  check "refused before any step: nothing on stdout" test ! -s "$out"
}

# cli.sweep.framework_overhead: a given overhead reaches the decision, the recommendation's last
# sentence and the JSON context; without one (an empty cache) the recommendation says "Engine only".
framework_overhead() {
  export ACCUMBENCH_CACHE_DIR="$work/cache"
  tiny_args --json "$work/given.json" --framework-overhead 7.5
  expect 0 "Weighed with 7.50 ms of framework host time added to every micro-step (--framework-overhead)" \
    -- sweep "${args[@]}"
  check "the JSON context holds the overhead and its source" py '
c = load(sys.argv[1])["context"]
if abs(c["framework_seconds_per_micro_step"] - 0.0075) > 1e-12: fail("seconds %r" % c["framework_seconds_per_micro_step"])
if c["framework_source"] != "--framework-overhead": fail("source %r" % c["framework_source"])
' "$work/given.json"
  tiny_args
  expect 0 "Engine only: a Python training loop adds host time per micro-step (not calibrated on this machine" \
    -- sweep "${args[@]}"
}

# cli.calibrate_framework.plain: the PyTorch reference (Debian's python3-torch) and the engine on
# the tiny shape; the cache it writes is what the next sweep's auto reads. Skipped without torch.
# A mode given twice is timed once, with a note.
calibrate_framework() {
  local python=${ACCUMBENCH_REFERENCE_PYTHON:-/usr/bin/python3}
  "$python" -c "import torch" 2>/dev/null || { echo "no torch in $python: skipped"; exit 77; }
  export ACCUMBENCH_CACHE_DIR="$work/cache"
  expect 0 "plain: " "per micro-step against the engine (95 %: " "Python packages: torch " \
    "accumbench: wrote $work/cache/framework-overhead.json" \
    "note: --frameworks lists plain more than once; the repeats are dropped" -- calibrate-framework \
    --model gpt2-tiny --seq-len 32 --batch 4 --micro-batches 1,4 --device cpu --threads 1 --steps 3 \
    --python "$python" --frameworks plain,plain
  check "the cache holds one plain fp32 entry for this CPU with finite slopes" py '
import math
e = load(sys.argv[1])["entries"]
if len(e) != 1: fail("%d entries" % len(e))
e = e[0]
if (e["framework"], e["precision"]) != ("plain", "fp32"): fail("entry %r" % e)
if not e["torch"]: fail("no PyTorch version in the entry")
for k in ("seconds_per_micro_step", "engine_seconds_per_micro_step", "reference_seconds_per_micro_step"):
    if not math.isfinite(e[k]): fail("%s %r" % (k, e[k]))
if abs(e["seconds_per_micro_step"] - (e["reference_seconds_per_micro_step"] - e["engine_seconds_per_micro_step"])) > 1e-9:
    fail("overhead is not reference - engine")
' "$work/cache/framework-overhead.json"
  tiny_args --json "$work/auto.json"
  expect 0 "framework host time added" "(calibrated " -- sweep "${args[@]}"  # "no ... added" when it calibrated <= 0
  check "auto read the calibration (negative counts as 0)" py '
import json
e = json.load(open(sys.argv[2]))["entries"][0]
c = load(sys.argv[1])["context"]
if abs(c["framework_seconds_per_micro_step"] - max(0.0, e["seconds_per_micro_step"])) > 1e-12: fail("auto used %r" % c["framework_seconds_per_micro_step"])
if not c["framework_source"].startswith("calibrated "): fail("source %r" % c["framework_source"])
' "$work/auto.json" "$work/cache/framework-overhead.json"
  # Another model is not given gpt2-tiny's host time: a Python loop's grows with the modules.
  expect 0 "Engine only: no framework host time added (none calibrated for llama, 2 layers, d_model 64, 4 heads (2 kv), d_ff 176, vocab 512, untied head; this device's fp32 calibrations are for gpt2, 2 layers, d_model 64, 4 heads (4 kv), d_ff 256, vocab 512: run accumbench calibrate-framework with this model)." \
    -- sweep --model llama-tiny --seq-len 32 --batch 4 --micro-batches 1,4 --device cpu --threads 1 --steps 2
}


# cli.calibrate_framework.lora: the job is part of the calibration. A LoRA job with checkpointing
# is calibrated as such (the reference adapts the same linears and checkpoints every block); a
# sweep of that job reads its entry, and a sweep of another job falls back to it, saying so, until
# that job has its own. Also the known answers of hf_real_step.py's PEFT arguments from an index
# (transformers is not on this machine: the mapping is all of that script that runs here).
calibrate_framework_lora() {
  local python=${ACCUMBENCH_REFERENCE_PYTHON:-/usr/bin/python3}
  "$python" -c "import torch" 2>/dev/null || { echo "no torch in $python: skipped"; exit 77; }
  export ACCUMBENCH_CACHE_DIR="$work/cache"
  local calibrate=(calibrate-framework --model gpt2-tiny --seq-len 32 --batch 4 --micro-batches 1,4 --device cpu
                   --threads 1 --steps 2 --python "$python" --frameworks plain)
  expect 0 "median step s, gpt2-tiny at T=32, " ", batch 4, LoRA on c_attn,attn_c_proj, checkpointed" "plain: " -- "${calibrate[@]}" \
    --lora-rank 4 --lora-targets attention --activation-checkpointing blocks
  check "the entry is keyed by the job and names the adapters" py '
e = load(sys.argv[1])["entries"]
if [x["job"] for x in e] != ["LoRA on c_attn,attn_c_proj, checkpointed"]: fail("jobs %r" % [x["job"] for x in e])
if e[0]["model"] != "gpt2, 2 layers, d_model 64, 4 heads (4 kv), d_ff 256, vocab 512": fail("model %r" % e[0]["model"])
if e[0]["weights_dtype"] != "fp32": fail("weights %r" % e[0]["weights_dtype"])
if "LoRA r4 on attention" not in e[0]["shape"]: fail("shape %r" % e[0]["shape"])
' "$work/cache/framework-overhead.json"
  tiny_args --lora-rank 4 --lora-targets attention --activation-checkpointing blocks --json "$work/lora.json"
  expect 0 "framework host time added" "(calibrated " -- sweep "${args[@]}"  # "no ... added" when it calibrated <= 0
  tiny_args --json "$work/full.json"
  expect 0 "; none for full fine-tuning" -- sweep "${args[@]}"
  check "the LoRA sweep reads its own entry; full fine-tuning falls back to it, saying whose it is" py '
import re
lora, full = load(sys.argv[1])["context"]["framework_source"], load(sys.argv[2])["context"]["framework_source"]
if not re.fullmatch(r"calibrated \S+, plain, LoRA on c_attn,attn_c_proj, checkpointed(; it measured -\S+ \S+ per micro-step, noise, counted as 0)?", lora): fail("LoRA source %r" % lora)
if not re.fullmatch(r"calibrated \S+, plain, on LoRA on c_attn,attn_c_proj, checkpointed; none for full fine-tuning(; it measured -\S+ \S+ per micro-step, noise, counted as 0)?", full):
    fail("full source %r" % full)
' "$work/lora.json" "$work/full.json"
  check "hf_real_step.py gives PEFT the index's adapters: its target_modules, alpha and dropout" py '
import argparse
sys.path.insert(0, sys.argv[1])
import hf_real_step
none = argparse.Namespace(lora_rank=0, lora_alpha=0)
def lora(arch, linears):
    index = {"model": {"arch": arch}, "lora": {"rank": 4, "scaling": 2.0, "dropout": 0.05, "linears": linears}}
    return hf_real_step.peft_lora(none, index)
want = [("gpt2", ["c_attn", "attn_c_proj"], ["c_attn", "attn.c_proj"]), ("gpt2", ["mlp_c_proj"], ["mlp.c_proj"]),
        ("gpt2", ["c_attn", "attn_c_proj", "c_fc", "mlp_c_proj"], "all-linear"), ("llama", ["q", "v"], ["q_proj", "v_proj"]),
        ("llama", ["q", "k", "v", "o", "gate", "up", "down"], "all-linear")]
for arch, linears, targets in want:
    got = lora(arch, linears)
    if got != dict(r=4, lora_alpha=8.0, lora_dropout=0.05, target_modules=targets): fail("%s %r: %r" % (arch, linears, got))
if hf_real_step.peft_lora(none, {"model": {"arch": "llama"}}) is not None: fail("LoRA without an index lora")
given = hf_real_step.peft_lora(argparse.Namespace(lora_rank=16, lora_alpha=0), {"model": {"arch": "llama"}})
if given != dict(r=16, lora_alpha=32, lora_dropout=0.0, target_modules="all-linear"): fail("--lora-rank: %r" % given)
' "$data/../../bench/reference"
  expect 0 ", batch 4, full fine-tuning" -- "${calibrate[@]}"
  tiny_args --json "$work/full.json"
  expect 0 "Recommendation:" -- sweep "${args[@]}"
  check "a second job adds an entry; full fine-tuning now reads its own" py '
import re
jobs = sorted(x["job"] for x in load(sys.argv[1])["entries"])
if jobs != ["LoRA on c_attn,attn_c_proj, checkpointed", "full fine-tuning"]: fail("jobs %r" % jobs)
full = load(sys.argv[2])["context"]["framework_source"]
if not re.fullmatch(r"calibrated \S+, plain, full fine-tuning(; it measured -\S+ \S+ per micro-step, noise, counted as 0)?", full): fail("full source %r" % full)
' "$work/cache/framework-overhead.json" "$work/full.json"
}

# cli.data.pipes: a lengths or token file given as a pipe (process substitution) can be read only
# once, and each command reads its data several times (the plan's worst micro-batch, the context
# block, the batches): before read_file_bytes the second read found "/dev/fd/63" empty, and a
# token FIFO hung. Each source as a pipe gives what the same file gives.
pipes() {
  local skewed=$data/lengths/skewed.txt
  tiny_args --micro-batches 4 --padding longest --json "$work/file.json" --lengths "$skewed"
  expect 0 "16 samples, 1 cut to T=32" -- sweep "${args[@]}"
  tiny_args --micro-batches 4 --padding longest --json "$work/pipe.json"
  expect 0 "16 samples, 1 cut to T=32" "Recommendation:" -- sweep "${args[@]}" --lengths <(cat "$skewed")
  check "a lengths pipe gives the file's samples, worst micro-batch and fingerprint" py '
import re
a, b = (dict(load(f)["context"]["options"]) for f in sys.argv[1:3])
for key in ("samples", "memory_judged_on"):
    if a[key].replace(sys.argv[3], "X") != re.sub(r"/dev/fd/[0-9]+", "X", b[key]): fail("%s: %r vs %r" % (key, a[key], b[key]))
if a["lengths_file_fingerprint"] != b["lengths_file_fingerprint"] or len(a["lengths_file_fingerprint"]) != 16:
    fail("fingerprints %r, %r" % (a["lengths_file_fingerprint"], b["lengths_file_fingerprint"]))
' "$work/file.json" "$work/pipe.json" "$skewed"
  expect 0 "(40 positions), padded to 48 (--padding multiple:16): T=48" -- \
    plan --model gpt2-tiny --seq-len 64 --batch 8 --padding multiple:16 --lengths <(cat "$skewed")
  tiny_verify_args --padding longest
  expect 0 "padding longest" "PASS: every split" -- verify "${args[@]}" --lengths <(cat "$skewed")
  tiny_args --micro-batches 4 --padding longest --eos-id 100
  expect 0 "split at eos 100: 3 samples, 3 cut to T=32" "Recommendation:" -- \
    sweep "${args[@]}" --tokens <(cat "$inputs/good.u16")
  tiny_args --micro-batches 4 --token-bytes 4
  expect 0 "Recommendation:" -- sweep "${args[@]}" --tokens <(cat "$inputs/good.u32")
}

# cli.resume.refuses_edited_lengths: the same number of samples, one length changed: the file's
# fingerprint tells them apart, so the measured splits are not mixed with another distribution's.
resume_edited_lengths() {
  sed 's/^30$/29/' "$data/lengths/skewed.txt" >"$work/edited.txt"
  tiny_args --micro-batches 4 --padding longest --lengths "$work/edited.txt"
  expect 0 "16 samples, 1 cut to T=32" -- sweep "${args[@]}" --json "$work/a.json"
  cp "$work/a.json" "$work/kept.json"
  cp "$data/lengths/skewed.txt" "$work/edited.txt"
  expect_user_error "measured with the content of the --lengths file" "resume with the same options, or write to a new file" -- \
    sweep "${args[@]}" --resume "$work/a.json"
  check "a refused resume leaves the file alone" cmp "$work/kept.json" "$work/a.json"
}

# cli.resume.lists_name_every_run: a resume with a shorter list keeps the file's other runs, and the
# file's context still names their values (this sweep's first, then the file's others).
resume_shorter_list() {
  tiny_args --micro-batches 2,4,2 --optimizer adamw,sgd --json "$work/a.json"
  expect 0 "Recommendation:" -- sweep "${args[@]}"
  check "a micro-batch given twice is recorded once, and noted" py '
result = load(sys.argv[1])
if dict(result["context"]["options"])["micro_batches"] != "2,4": fail("not 2,4")
if "--micro-batches lists 2 more than once; the repeats are dropped" not in result["notes"]: fail("notes %r" % result)
' "$work/a.json"
  cp "$work/a.json" "$work/stopped.json"
  tiny_args --micro-batches 1 --optimizer sgd --resume "$work/a.json" --json "$work/a.json"
  expect 0 "Recommendation:" -- sweep "${args[@]}"
  check "the resumed file names every run's micro-batch and optimizer" py '
result = load(sys.argv[1])
options = dict(result["context"]["options"])
if options["optimizer"] != "sgd,adamw": fail("optimizer %r" % options["optimizer"])
if options["micro_batches"] != "1,2,4": fail("micro_batches %r" % options["micro_batches"])
runs = sorted((r["config"]["micro_batch"], r["config"]["optimizer"]) for r in result["runs"])
if runs != [(1, "sgd"), (2, "adamw"), (2, "sgd"), (4, "adamw"), (4, "sgd")]: fail("runs %r" % runs)
# The notes are those of this command, over every run: not what the first sweep said of its own
# command line (a repeat this command does not have).
notes = result["notes"]
if any("more than once" in note for note in notes): fail("notes %r" % notes)
if len(set(notes)) != len(notes): fail("a note twice: %r" % notes)
' "$work/a.json"
  # A stopped file (saved while running: 2×2 sgd one timed step short of --steps 2, "1×4 sgd" never
  # begun) resumed with adamw alone keeps them as they were, and says so; compare warns.
  py '
import json
result = load(sys.argv[1])
result["interruption"]["saved_while_running"] = True
result["interruption"]["splits_not_run"] = ["1×4 sgd"]
for run in result["runs"]:
    if run["config"]["optimizer"] == "sgd" and run["config"]["micro_batch"] == 2:
        run["steps"] = run["steps"][:1]
        run["step_seconds"]["count"] = 1  # the summary of the step kept, as a save writes it
json.dump(result, open(sys.argv[1], "w"))
' "$work/stopped.json"
  tiny_args --micro-batches 2,4 --optimizer adamw --resume "$work/stopped.json" --json "$work/stopped.json"
  expect 0 "Kept from the --resume file as it had them, outside this sweep's lists: 1 split short of --steps 2 (timed steps 2×2 sgd: 1) and 1 split never begun (1×4 sgd); the --resume with the file's own lists measures them." -- \
    sweep "${args[@]}"
  check "the resumed file still names the split never begun, and its lists reach it" py '
result = load(sys.argv[1])
stop = result["interruption"]
if stop["splits_not_run"] != ["1×4 sgd"] or stop["saved_while_running"]: fail("interruption %r" % stop)
options = dict(result["context"]["options"])
if options["micro_batches"] != "1,2,4" or options["optimizer"] != "adamw,sgd": fail("lists %r" % options)
' "$work/stopped.json"
  # The --resume with the file's own lists measures what it kept unfinished.
  cp "$work/stopped.json" "$work/finished.json"
  tiny_args --micro-batches 1,2,4 --optimizer adamw,sgd --resume "$work/finished.json" --json "$work/finished.json"
  expect 0 "Recommendation:" -- sweep "${args[@]}"
  check "nothing is left unfinished" py '
result = load(sys.argv[1])
if result["interruption"]["splits_not_run"]: fail("interruption %r" % result["interruption"])
short = [r["config"]["micro_batch"] for r in result["runs"] if r["status"] == "ok" and len(r["steps"]) < 2]
if short: fail("short of --steps: %r" % short)
' "$work/finished.json"
  expect 0 "warning: A keeps splits outside its last sweep's lists that are not measured to its --steps (1 short of --steps, 1 never begun)" -- \
    compare "$work/stopped.json" "$work/a.json"
}

# cli.resume.raised_steps_undecided: a resume with a raised --steps whose lists leave out the
# fastest split keeps it with its 3 rounds: "Undecided after" counts that split's rounds, not the
# re-timed one's 12, and the fix is a resume that times them side by side (a longer --time-budget of
# this command never would). T=8 and batch 32: 32×1 is about four times faster than 1×32 (one
# micro-step against 32) on a quiet machine, but the two sweeps run at different times, and a
# parallel test that stalled the first one's three rounds of 32×1 past the second's 1×32 (fresh-clone
# CI, 64 ms against 37 ms) turns which split is ahead. Both orders name the kept split's rounds.
resume_raised_steps() {
  tiny_args --seq-len 8 --batch 32 --micro-batches 1,32 --steps 3 --time-budget 0 --json "$work/a.json"
  expect 0 "Recommendation: " -- sweep "${args[@]}"
  tiny_args --seq-len 8 --batch 32 --micro-batches 1 --steps 12 --time-budget 0 --resume "$work/a.json" --json "$work/a.json"
  local fix="the --resume $work/a.json with the file's own lists times them side by side, which can decide"
  expect 0 "$fix" -- sweep "${args[@]}"
  local ahead missing
  if grep -qF "Recommendation: 32×1" "$out"; then
    ahead="Undecided after 3 rounds of 32×1 (up to 12 of the others): 32×1 is ahead"
  else
    ahead="Undecided after 12 rounds: 1×32 is ahead, but 32×1 had fewer than 10 rounds beside it"
  fi
  if missing=$(missing_patterns "$out" -- "$ahead"); then fail "output lacks \"$missing\""; fi
}

# cli.resume.new_split_races_the_fastest: a --resume that adds a split (2×4) times the file's fastest
# again beside it, in the same rounds, so the two are compared on paired rounds (timed alone, the
# new split ended undecided against the kept fastest with the budget unspent: helper-103).
resume_new_split() {
  # 1×8 against 8×1 (about 2× apart here) is decided in the first sweep's 10 rounds; were it not,
  # its contenders would be timed again anyway and the check below could not fail.
  tiny_args --batch 8 --micro-batches 1,8 --steps 10 --time-budget 2 --json "$work/a.json"
  expect 0 "Recommendation: " -- sweep "${args[@]}"
  # On a CPU where the two are close (an AMD EPYC here: 0.87-1.15x after 79 rounds) the premise does
  # not hold, and the check below could not fail: skipped, saying so.
  if python3 -c 'import json, sys; sys.exit(0 if json.load(open(sys.argv[1]))["recommendation"]["decision"]["kind"] == "undecided" else 1)' \
    "$work/a.json"; then
    skip "1x8 and 8x1 are too close on this CPU for the first sweep to decide, which the check needs"
  fi
  tiny_args --batch 8 --micro-batches 1,2,8 --steps 6 --time-budget 3 --resume "$work/a.json" --json "$work/a.json"
  expect 0 "Recommendation: " -- sweep "${args[@]}"
  check "the new 2×4 and the file's fastest share this sweep's rounds" py '
r = load(sys.argv[1])
runs = r["runs"]
new = [x for x in runs if x["config"]["micro_batch"] == 2][0]
latest = max(s["session"] for s in new["steps"])
rounds = lambda x: {s["round"] for s in x["steps"] if s["session"] == latest}
raced = [x for x in runs if x is not new and len(rounds(x) & rounds(new)) >= 6]
if not raced: fail("no kept split timed in the rounds of 2x4: %s" % [(x["config"]["micro_batch"], sorted(rounds(x))) for x in runs])
' "$work/a.json"
}

# cli.resume.same_lengths_by_another_path: a lengths file named by another path (relative against
# absolute) with the same content is the same input; other content is refused by its content.
resume_lengths_path() {
  cp "$data/lengths/skewed.txt" "$work/lengths.txt"
  tiny_args --lengths lengths.txt --padding longest --micro-batches 1,4 --steps 2 --time-budget 0 --json "$work/a.json"
  pushd "$work" >/dev/null || fail "no $work"
  expect 0 "Recommendation:" -- sweep "${args[@]}"
  popd >/dev/null || fail "no way back"
  tiny_args --lengths "$work/lengths.txt" --padding longest --micro-batches 1,2,4 --steps 2 --time-budget 0 \
    --resume "$work/a.json" --json "$work/a.json"
  expect 0 "Recommendation:" -- sweep "${args[@]}"
  echo 7 >>"$work/lengths.txt"
  expect 2 "the content of the --lengths file" -- sweep "${args[@]}"
}

# cli.compare.distinct_steps_of_other_rounds: two sweeps over an epoch of 4 steps, of 1 and 4 rounds,
# timed other steps of the data: compare says so rather than "not in what they measured".
compare_distinct_steps() {
  tiny_args --batch 8 --micro-batches 2,8 --lengths "$data/lengths/skewed.txt" --padding longest --group-by-length \
    --distinct-steps epoch --steps 1 --time-budget 0 --json "$work/one.json"
  expect 0 "Recommendation:" -- sweep "${args[@]}"
  tiny_args --batch 8 --micro-batches 2,8 --lengths "$data/lengths/skewed.txt" --padding longest --group-by-length \
    --distinct-steps epoch --steps 4 --time-budget 0 --json "$work/four.json"
  expect 0 "Recommendation:" -- sweep "${args[@]}"
  expect 0 "note: the two sweeps differ in how long they measured or how they decided: steps (1 vs 4); under --distinct-steps each round trains the next step of the data, so a sweep of fewer rounds than the data has steps timed only the first of them" \
    -- compare "$work/one.json" "$work/four.json"
}

# cli.resume.new_limit_keeps_times: a file left undecided (2 rounds, too few for an interval) is
# resumed with a --time-budget, which times its contenders again, and a --memory-limit that skips
# 8×1 as predicted out of memory: the skip measures nothing, so 8×1 keeps the file's timed steps,
# judged against the limit (before, the resumed file held 8×1 as predicted-oom with no times).
resume_new_limit() {
  tiny_args --seq-len 128 --batch 8 --micro-batches 1,8 --json "$work/a.json"
  expect 0 "Undecided after 2 rounds" -- sweep "${args[@]}"
  cp "$work/a.json" "$work/before.json"
  tiny_args --seq-len 128 --batch 8 --micro-batches 1,8 --time-budget 1 --memory-limit 15MiB \
    --resume "$work/a.json" --json "$work/a.json"
  expect 0 "Recommendation: 1×8" -- sweep "${args[@]}"
  check "8×1 keeps the file's steps and does not fit the new limit; 1×8 was timed again" py '
import json
before = {r["config"]["micro_batch"]: r for r in json.load(open(sys.argv[2]))["runs"]}
after = {r["config"]["micro_batch"]: r for r in load(sys.argv[1])["runs"]}
eight = after[8]
if eight["status"] != "ok" or eight["fits"]: fail("8x1 status %r fits %r" % (eight["status"], eight["fits"]))
if eight["steps"] != before[8]["steps"]: fail("8x1 steps changed")
if after[1]["steps"] == before[1]["steps"]: fail("1x8 was not timed again")
' "$work/a.json" "$work/before.json"
  # Every divisor, 4×2 and 8×1 kept from the file over an 8 MiB limit: the rounds share the
  # confidence among the same splits as the final decision (every split with timed steps), so they
  # end decided or with the budget spent, never undecided with budget left (3 of 3 before: they
  # stopped after 17–31 rounds, then the final decision's wider intervals said "a longer
  # --time-budget can decide").
  tiny_args --seq-len 128 --batch 8 --json "$work/b.json"
  expect 0 "Undecided after 2 rounds" -- sweep "${args[@]}"
  tiny_args --seq-len 128 --batch 8 --time-budget 20 --memory-limit 8MiB \
    --resume "$work/b.json" --json "$work/b.json"
  expect 0 "Recommendation:" -- sweep "${args[@]}"
  check "the resumed rounds ended decided, or with their budget spent" py '
d = load(sys.argv[1])["recommendation"]["decision"]
if d["kind"] == "undecided" and not d["budget_spent"] and not d["interrupted"]:
    fail("undecided after %d rounds with budget left" % d["rounds"])
' "$work/b.json"
}

# cli.output.stdout_fails: a full stdout (/dev/full) loses what a command prints there; the command
# says so on stderr and exits 2 instead of 0, and a --json file is written all the same.
stdout_fails() {
  tiny_args --json "$work/full.json"
  last_command="accumbench sweep ${args[*]} >/dev/full"
  "$bin" sweep "${args[@]}" >/dev/full 2>"$err"
  rc=$?
  [ "$rc" -eq 2 ] || fail "exit status $rc, expected 2"
  check "a failed stdout is said in one sentence" grep -q "^accumbench: error: writing to standard output failed" "$err"
  check "the sweep's fix is its --json" grep -q "write the results to a file (--json FILE" "$err"
  check "the --json file is written all the same" test -s "$work/full.json"
  last_command="accumbench models >/dev/full"
  "$bin" models >/dev/full 2>"$err"
  rc=$?
  [ "$rc" -eq 2 ] || fail "models: exit status $rc, expected 2"
  # models has no --json: its fix is a stream with room.
  check "models' fix names no option it lacks" grep -q "lost; send stdout to a file or a stream with room (> FILE)$" "$err"
}

mode=${case_args[0]:-}
# cli.sweep.nothing_fits_keeps_files: a limit the plan says no split fits measures nothing, so its
# files are not written over an earlier sweep's (exit 2, as the limit is the input to fix); resumed
# under it, the file's timed splits do not fit either: exit 2 with the same sentence, not "no split
# ran successfully" (exit 1, helper-80's findings).
nothing_fits_keeps_files() {
  tiny_args --micro-batches 1,4 --json "$work/a.json"
  expect 0 "Recommendation:" -- sweep "${args[@]}"
  cp "$work/a.json" "$work/before.json"
  tiny_args --micro-batches 1,4 --memory-limit 2.6MiB --json "$work/a.json" --csv "$work/a.csv"
  expect 2 "no split of this sweep fits in --memory-limit 2.6 MiB" \
    "nothing was measured (the plan skipped every split), so no file was written" -- sweep "${args[@]}"
  check "the earlier JSON is kept" cmp -s "$work/a.json" "$work/before.json"
  check "no CSV of nothing measured" test ! -e "$work/a.csv"
  check "no wrote line" bash -c '! grep -q "wrote" "$1"' _ "$err"
  tiny_args --micro-batches 1,4 --memory-limit 2.6MiB --resume "$work/a.json" --json "$work/a.json"
  expect 2 "no split of this sweep fits in --memory-limit 2.6 MiB" -- sweep "${args[@]}"
  check "not said to have failed" bash -c '! grep -q "no split ran successfully" "$1"' _ "$err"
  check "the resumed file keeps both splits' steps, neither fitting" py '
import json
before = {r["config"]["micro_batch"]: r for r in json.load(open(sys.argv[2]))["runs"]}
after = {r["config"]["micro_batch"]: r for r in load(sys.argv[1])["runs"]}
for b in (1, 4):
    if after[b]["status"] != "ok" or after[b]["fits"]: fail("%d: status %r fits %r" % (b, after[b]["status"], after[b]["fits"]))
    if after[b]["steps"] != before[b]["steps"]: fail("%d: steps changed" % b)
' "$work/a.json" "$work/before.json"
}

# cli.sweep.resume_cpu_settings: a --resume file is compared by the threads that ran, not the
# option's words ("all" on a machine of 2 is --threads 2); TF32, which acts on nothing on the CPU,
# may differ; OpenMP's wait policy, which changes every CPU step's time, may not (helper-80).
resume_cpu_settings() {
  tiny_args --micro-batches 1,4 --threads 0 --json "$work/a.json"
  expect 0 "Recommendation:" -- sweep "${args[@]}"
  local threads
  threads=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["context"]["threads"])' "$work/a.json")
  tiny_args --micro-batches 1,4 --threads "$threads" --tf32 off --steps 3 --resume "$work/a.json"
  expect 0 "Recommendation:" "note: --tf32 off changes nothing on the CPU" -- sweep "${args[@]}"
  tiny_args --micro-batches 1,4 --threads "$threads" --resume "$work/a.json"
  OMP_WAIT_POLICY=ACTIVE expect 2 "--resume file was measured with the environment's OMP_WAIT_POLICY \"PASSIVE\", this sweep has \"ACTIVE\"" \
    -- sweep "${args[@]}"
  # OpenMP reads the policy in any case.
  OMP_WAIT_POLICY=passive expect 0 "Recommendation:" -- sweep "${args[@]}"
  if [ "$threads" -gt 1 ]; then
    tiny_args --micro-batches 1,4 --threads 1 --resume "$work/a.json"
    expect 2 "--resume file was measured with --threads \"$threads threads\", this sweep has \"1 thread\"" -- sweep "${args[@]}"
  fi
}

# cli.sweep.grouped_plan_matches: a grouped order's steps hold their longest samples first, before
# any gradient exists; planned so, every split's peak is within 0.5 % of its plan (before: 1×8,
# 2×4 and 4×2 5.5 %, 19.2 % and 13.5 % above it). With 16 samples in steps of 12 the second step
# goes on from the start of the order, the longest sample in a later micro-batch: the plan must
# not fall below the peak there (it was 16 % under at 2×6).
grouped_plan_matches() {
  local batch json
  for batch in 8 12; do
    json="$work/g$batch.json"
    tiny_args --seq-len 64 --batch "$batch" --lengths "$data/lengths/skewed.txt" --padding longest --group-by-length \
      --json "$json"
    expect 0 "Recommendation:" -- sweep "${args[@]}"
    check "batch $batch: every grouped split within 0.5 % of its plan (at 12, none below it)" py '
both_ways = sys.argv[2] == "8"
for r in load(sys.argv[1])["runs"]:
    measured, planned = r["peak_allocated_bytes"], r["predicted_peak_bytes"]
    if planned < measured * 0.995 or (both_ways and planned > measured * 1.005):
        fail("%dx%d: planned %d, measured %d" % (r["config"]["micro_batch"], r["config"]["accum_steps"], planned, measured))
' "$json" "$batch"
  done
}

# cli.sweep.json_reads_as_the_tables: rows of steps of many sizes (padding to each micro-batch's
# longest) show their mean phases; the JSON says so (tables_read "mean") and holds those means
# (phase_mean_seconds), to the CSV's digit. A split skipped as predicted out of memory writes null
# for what it never measured, not 0; tokens_per_step is the mean, not a whole number; fits is null
# without a limit.
json_reads_as_the_tables() {
  tiny_args --lengths "$data/lengths/skewed.txt" --padding longest --batch 8 --micro-batches 1,8 --steps 3 \
    --json "$work/a.json" --csv "$work/a.csv"
  expect 0 "Recommendation:" -- sweep "${args[@]}"
  check "the JSON's phase means are the CSV's phases, and its rates are the tables'" py '
rows = {r["label"]: r for r in csv.DictReader(open(sys.argv[2], encoding="utf-8"))}
for run in load(sys.argv[1])["runs"]:
    label = "%d\u00d7%d" % (run["config"]["micro_batch"], run["config"]["accum_steps"])
    row = rows[label]
    if run["tables_read"] != "mean": fail("%s reads %r" % (label, run["tables_read"]))
    for phase in ("forward", "backward", "optimizer"):
        if abs(run["phase_mean_seconds"][phase] - float(row[phase + "_seconds"])) > 1e-9 * max(1.0, float(row[phase + "_seconds"])):
            fail("%s %s: JSON %r, CSV %r" % (label, phase, run["phase_mean_seconds"][phase], row[phase + "_seconds"]))
    if run["fits"] is not None or row["fits"] != "": fail("%s fits %r / %r without a limit" % (label, run["fits"], row["fits"]))
    steps = run["steps"]
    if not any(s["positions"] != steps[0]["positions"] for s in steps): fail("%s: steps of one size" % label)
' "$work/a.json" "$work/a.csv"
  tiny_args --lengths "$data/lengths/skewed.txt" --padding longest --batch 8 --micro-batches 1,8 --steps 2 --memory-limit 2.9MiB \
    --json "$work/b.json"
  expect 0 "Recommendation:" -- sweep "${args[@]}"
  check "the split skipped as predicted out of memory has null for what it never measured" py '
runs = {r["config"]["micro_batch"]: r for r in load(sys.argv[1])["runs"]}
skipped = runs[8]
if skipped["status"] != "predicted-oom": fail("8x1 status %r" % skipped["status"])
for key in ("tokens_per_second", "tokens_per_step", "peak_allocated_bytes", "achieved_tflops", "tables_read"):
    if skipped[key] is not None: fail("8x1 %s is %r" % (key, skipped[key]))
if skipped["phase_median_seconds"]["forward"] is not None: fail("8x1 forward %r" % skipped["phase_median_seconds"])
if skipped["fits"] is not False or runs[1]["fits"] is not True: fail("fits %r %r" % (skipped["fits"], runs[1]["fits"]))
' "$work/b.json"
  expect 0 "1×8" -- report "$work/b.json"
}

# cli.resume.tolerance_note: a resume decides with its own --tie-tolerance and --confidence; where
# they are not the file's, a note says so and gives the file's.
resume_tolerance_note() {
  tiny_args --micro-batches 1,4 --tie-tolerance 0.01 --json "$work/a.json"
  expect 0 "Recommendation:" -- sweep "${args[@]}"
  cp "$work/a.json" "$work/b.json"
  tiny_args --micro-batches 1,4 --tie-tolerance 0.01 --resume "$work/a.json"
  expect 0 "Recommendation:" -- sweep "${args[@]}"
  check "the same tolerance: no note" bash -c '! grep -q "resume file.s sweep decided with" "$1"' _ "$err"
  tiny_args --micro-batches 1,4 --resume "$work/b.json"
  expect 0 "note: the --resume file's sweep decided with a tie tolerance of 0.01 at 0.95 confidence, this one decides every split with a tie tolerance of 0.03 at 0.95 confidence; give --tie-tolerance 0.01 --confidence 0.95 to decide as it did" -- sweep "${args[@]}"
}

# cli.verify.json: verify --json holds what the console shows, job by job: every split's errors
# (the console's to its three digits), the tolerances and the verdict; a failing list is "fail"
# with exit 1, fixed lengths say that the normalization went unchecked; a sweep's results at the
# path are refused, not replaced.
verify_json() {
  tiny_verify_args --lengths variable --loss-normalization mean-of-means --max-grad-norm 0,1 --json "$work/v.json"
  expect 1 "FAIL" "wrote $work/v.json" -- verify "${args[@]}"
  check "verify --json: two failing jobs of three splits, each row's errors as the console's" py '
v = load(sys.argv[1])
if v["kind"] != "accumbench verify" or v["verdict"] != "fail": fail("kind/verdict %s %s" % (v["kind"], v["verdict"]))
jobs = v["jobs"]
if [j["job"] for j in jobs] != ["--max-grad-norm 0", "--max-grad-norm 1"]: fail("jobs %s" % [j["job"] for j in jobs])
if [j["max_grad_norm"] for j in jobs] != [0, 1] or jobs[0]["reference_grad_norm"] is not None: fail("clipping")
rows = split_rows(sys.argv[2])
entries = [s for j in jobs for s in j["splits"]]
if len(rows) != 6 or len(entries) != 6: fail("%d rows, %d entries" % (len(rows), len(entries)))
for row, s in zip(rows, entries):
    words = row.split()
    shown = [words[0], "%.6f" % s["loss"], "%.2e" % s["max_abs_grad_diff"], "%.2e" % s["rel_l2_grad_error"],
             "%.2e" % s["max_weight_diff"], "%.2e" % s["rel_l2_update_error"], "PASS" if s["pass"] else "FAIL"]
    if s["split"] != words[0] or words != shown: fail("row %r, entry %s" % (row, shown))
for j in jobs:
    if j["all_pass"] or not j["normalization_checked"] or j["loss_normalization"] != "mean-of-means": fail("job %s" % j)
    if (j["gradient_tolerance"], j["update_tolerance"], j["judged_in"]) != (1e-05, 0.01, "fp32"): fail("tolerances %s" % j)
    if j["splits"][-1]["pass"] is not True or j["splits"][0]["pass"] is not False: fail("verdicts %s" % j["splits"])
if v["options"]["loss_normalization"] != "mean-of-means": fail("options %s" % v["options"])
' "$work/v.json" "$out"
  tiny_verify_args --json "$work/fixed.json"
  expect 0 "PASS" -- verify "${args[@]}"
  check "verify --json on fixed lengths: pass, the normalization not checked" py '
v = load(sys.argv[1])
if v["verdict"] != "pass" or len(v["jobs"]) != 1 or v["jobs"][0]["job"] is not None: fail("%s" % v)
if v["jobs"][0]["normalization_checked"] is not False or v["jobs"][0]["lengths"] != "fixed": fail("%s" % v["jobs"][0])
' "$work/fixed.json"
  # With clipping every split's own norm, the clip's measurement, is judged against the reference's.
  tiny_verify_args --lengths variable --max-grad-norm 0.01 --optimizer sgd --json "$work/clip.json"
  expect 0 "(each split's own: " "so every split's gradient is scaled by" -- verify "${args[@]}"
  check "verify --json with clipping: each split's gradient norm within the gradient's bar of the reference's" py '
v = load(sys.argv[1])
job = v["jobs"][0]
if not job["reference_grad_norm"] or job["reference_grad_norm"] <= 0.01: fail("reference norm %s" % job["reference_grad_norm"])
for s in job["splits"]:
    if s["grad_norm"] is None or s["rel_grad_norm_error"] is None or s["rel_grad_norm_error"] > 1e-5: fail("split %s" % s)
    if abs(s["grad_norm"] / job["reference_grad_norm"] - 1) > 1e-5: fail("norm %s" % s)
' "$work/clip.json"
  expect_user_error "$work/fixed.json holds verify's results (\`accumbench verify --json\`), not a sweep's" -- report "$work/fixed.json"
  check "verify --json without clipping: no norm" py '
v = load(sys.argv[1])
if any(s["grad_norm"] is not None for s in v["jobs"][0]["splits"]): fail("%s" % v["jobs"][0]["splits"])
' "$work/fixed.json"
  tiny_args --micro-batches 4 --json "$work/sweep.json"
  expect 0 "Recommendation:" -- sweep "${args[@]}"
  cp "$work/sweep.json" "$work/sweep-copy.json"
  tiny_verify_args --json "$work/sweep.json"
  expect_user_error "$work/sweep.json holds a sweep's results, which verify --json would replace with its own; give verify --json another file" -- verify "${args[@]}"
  check "the sweep's results are kept" cmp "$work/sweep.json" "$work/sweep-copy.json"
  expect_user_error "$work/sweep.json holds a sweep's results, which plan --json would replace with its own" -- \
    plan --model gpt2-tiny --seq-len 32 --batch 4 --json "$work/sweep.json"
  check "the sweep's results are kept by plan" cmp "$work/sweep.json" "$work/sweep-copy.json"
}

# cli.calibrate.interrupt: a stop signal while the Python reference runs stops it too (its own
# process group), removes the temporary export and writes no cache: one sentence, exit 143 for
# SIGTERM (a background job of a script ignores SIGINT, as the handler leaves it).
calibrate_framework_interrupt() {
  local python=${ACCUMBENCH_REFERENCE_PYTHON:-/usr/bin/python3}
  "$python" -c "import torch" 2>/dev/null || { echo "no torch in $python: skipped"; exit 77; }
  export ACCUMBENCH_CACHE_DIR="$work/cache"
  last_command="accumbench calibrate-framework ... (SIGTERM while the reference runs)"
  "$bin" calibrate-framework --model qwen3-tiny --seq-len 64 --batch 8 --micro-batches 1,8 --device cpu --threads 1 \
    --steps 200 --python "$python" --frameworks plain >"$out" 2>"$err" &
  local pid=$! waited=0
  # The reference's command line names the export folder, which names accumbench's pid.
  until pgrep -f "accumbench-calibrate-$pid" >/dev/null; do
    sleep 0.2
    waited=$((waited + 1))
    [ "$waited" -lt 1500 ] || { kill -9 "$pid"; fail "the reference never started"; }
    kill -0 "$pid" 2>/dev/null || fail "calibrate-framework ended before its reference started"
  done
  kill -TERM "$pid"
  wait "$pid"
  rc=$?
  [ "$rc" -eq 143 ] || fail "exit status $rc, expected 143"
  check "one sentence says what stopped and what was kept" grep -q "^accumbench: calibrate-framework stopped by SIGTERM while the PyTorch reference ran (stopped too): nothing was written, and the cache keeps its earlier calibrations$" "$err"
  sleep 0.5
  check "the reference was stopped" bash -c '! pgrep -f "accumbench-calibrate-$1" >/dev/null' _ "$pid"
  check "the temporary export was removed" test ! -e "${TMPDIR:-/tmp}/accumbench-calibrate-$pid"
  check "no cache was written" test ! -e "$work/cache/framework-overhead.json"
}

# cli.verify.export_replaced: a second export into the folder of an earlier one that cannot be
# written whole (here: "updated" is a file, so the updated weights cannot go under it) leaves no
# index.json: the earlier export's index over the newer weights read as a PASS's files (helper-104).
export_replaced() {
  local dir=$work/exp
  tiny_verify_args --export "$dir"
  expect 0 "PASS" -- verify "${args[@]}"
  check "the first export has its index and its updated weights" test -f "$dir/index.json" -a -d "$dir/updated"
  rm -rf "$dir/updated"
  echo "not a directory" >"$dir/updated"
  tiny_verify_args --export "$dir" --seed 1
  expect_user_error "cannot write" "$dir/updated/" "for verify --export" "give a directory you can write to" -- verify "${args[@]}"
  check "the earlier index.json is gone, so the folder reads as no export" test ! -e "$dir/index.json"
}

# cli.input.oversized_files: a file far larger than its kind is refused before it is read
# (helper-104: a 3 GB --hf-config took 68 s and 6.4 GB of memory before "not valid JSON"); sparse
# files, so the test writes nothing.
oversized_files() {
  truncate -s 100M "$work/model.safetensors"
  truncate -s 3G "$work/huge.json"
  expect_user_error "--hf-config \"$work/model.safetensors\" is 100.0 MiB, far larger than a Hugging Face config.json" \
    "(at most 64.0 MiB is read); check the path" -- plan --hf-config "$work/model.safetensors" --seq-len 32 --batch 4
  expect_user_error "--trl-config \"$work/model.safetensors\" is 100.0 MiB, far larger than a TRL YAML config" -- \
    plan --trl-config "$work/model.safetensors" --model gpt2-tiny
  expect_user_error "the result file \"$work/huge.json\" is 3.00 GiB, far larger than any sweep's results" -- \
    report "$work/huge.json"
}

# cli.output.long_file_name: a legal name of 250 bytes is written (its temporary beside it takes a
# shorter name than "<name>.<pid>-<n>.tmp", which passed 255 bytes: helper-104).
long_file_name() {
  local name
  name="$work/$(printf 'a%.0s' $(seq 245)).json"
  expect 0 "splits of batch 4" -- plan --model gpt2-tiny --seq-len 32 --batch 4 --json "$name" --detail off
  check "the 250-byte name holds the plan's JSON" py '
import json, sys
if not json.load(open(sys.argv[1]))["splits"]: fail("no splits")
' "$name"
  check "no temporary is left beside it" bash -c '! ls -A "$1" | grep -q "\.tmp$"' _ "$work"
  # One byte past what a file system takes: refused before anything runs (helper-108: the short
  # temporary let the check pass, and the sweep lost its results at the rename).
  name="$work/$(printf 'b%.0s' $(seq 256))"
  expect_user_error "has a name of 256 bytes, more than a file system takes (255); give a shorter name" -- \
    sweep --model gpt2-tiny --seq-len 32 --batch 4 --device cpu --threads 1 --warmup 1 --steps 2 --json "$name"
}

# cli.plan.stored_dtype_note_not_under_peft_qlora: a 4-bit base prepared by PEFT holds every other
# parameter in fp32 whatever --weights-dtype says, so the config's stored dtype gets no note
# naming --weights-dtype (helper-107: it said "--weights-dtype bf16 measures that job", and with
# it another note said the option changes nothing).
stored_dtype_qlora() {
  expect 0 "stores its weights in bfloat16; here they are held in fp32" -- \
    plan --hf-config "$data/hf/llama.json" --seq-len 32 --batch 4 --device cpu --lora-rank 4
  expect 0 "splits of batch 4" -- plan --hf-config "$data/hf/llama.json" --seq-len 32 --batch 4 --device cpu --lora-rank 4 \
    --base-quant nf4
  check "no stored-dtype note under --base-quant nf4 --kbit-prep peft" bash -c '! grep -q "stores its weights in" "$1" "$2"' _ "$out" "$err"
}

# cli.sweep.json_locked: a second sweep writing the --json a running one writes is refused, naming
# the first's pid (helper-104: both rewrote the file after every split, one's results lost, both
# said "wrote"); once the first has ended, the file is free again.
json_locked() {
  export ACCUMBENCH_CACHE_DIR="$work/cache"
  local json=$work/same.json
  tiny_args --steps 400 --json "$json"
  "$bin" sweep "${args[@]}" >"$work/first.out" 2>&1 &
  local first=$!
  background_pids+=("$first")
  local waited=0
  until [ -s "$json" ]; do  # the lock is taken before the first save
    sleep 0.1
    waited=$((waited + 1))
    [ "$waited" -lt 600 ] || fail "the first sweep saved nothing"
  done
  tiny_args --json "$work/./same.json"  # the same file by another spelling
  expect_user_error "another accumbench (pid $first) is writing \"$work/./same.json\" (its --json)" \
    "wait for it to finish, or give this one another --json file" -- sweep "${args[@]}"
  kill -TERM "$first"  # (SIGINT is ignored by a background job of a script)
  wait "$first" || true
  tiny_args --json "$json"
  expect 0 "wrote $json" -- sweep "${args[@]}"
}

case $mode in
  models | knobs | precisions | chunked_loss | token_file | help_defaults | verify_token | verify_chunked | \
    verify_oib | plan_chunked | plan_calibrate | emit_round_trip | plan_outputs | verify_oom | framework_overhead | \
    calibrate_framework | calibrate_framework_lora | pipes | resume_edited_lengths | resume_shorter_list | resume_new_limit | \
    stdout_fails | grouping_equal_lengths | resume_raised_steps | resume_lengths_path | compare_distinct_steps | \
    nothing_fits_keeps_files | resume_cpu_settings | grouped_plan_matches | json_reads_as_the_tables | \
    calibrate_framework_interrupt | resume_tolerance_note | verify_json | resume_new_split | export_replaced | oversized_files | long_file_name | stored_dtype_qlora | json_locked) "$mode" ;;
  *) echo "$case_name: unknown mode \"$mode\"" >&2; exit 2 ;;
esac
cli_pass
