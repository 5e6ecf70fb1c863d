#!/usr/bin/env bash
# Data parallel as torchrun launches it: every variable torchrun sets for a worker (RANK,
# LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, ROLE_RANK, ROLE_WORLD_SIZE, MASTER_ADDR,
# MASTER_PORT, TORCHELASTIC_RUN_ID; torch/distributed/run.py's docs), one process per rank on
# 127.0.0.1 (c10d, Gloo). Debian's torchrun 1.13 itself crashes on Python 3.11, so this script is
# the launcher. One ctest case per mode; each takes a free port, so the
# cases run in parallel with each other.
#
#   tests/cli/data_parallel.sh BINARY DATA_DIR CLI_DIR CASE verify|sweep
# shellcheck disable=SC2317  # the mode functions are called as "$mode"
source "$(dirname "$0")/lib.sh"
cli_init "$@"

# dp_run RANKS ARGS...: accumbench ARGS as RANKS processes; rank 0's output in $out/$err and its
# status in $rc, the other ranks' output in $out.rank<r>, their worst status in $dp_rc. Every rank
# must exit with $dp_want_rc (default 0; `dp_want_rc=2 dp_run ...` for a refusal).
dp_run() {
  local ranks=$1 port r pid
  shift
  port=$(free_port) || fail "no free port"
  last_command="WORLD_SIZE=$ranks MASTER_ADDR=127.0.0.1 MASTER_PORT=$port accumbench $*"
  local pids=()
  torchrun_env() {  # torchrun_env RANK: the variables of that worker, one node
    echo "RANK=$1 LOCAL_RANK=$1 GROUP_RANK=0 ROLE_RANK=$1 WORLD_SIZE=$ranks LOCAL_WORLD_SIZE=$ranks" \
      "ROLE_WORLD_SIZE=$ranks MASTER_ADDR=127.0.0.1 MASTER_PORT=$port TORCHELASTIC_RUN_ID=accumbench-test"
  }
  for ((r = 1; r < ranks; r++)); do
    # shellcheck disable=SC2046  # one word per variable
    env $(torchrun_env "$r") timeout "$run_limit_s" "$bin" "$@" >"$out.rank$r" 2>&1 &
    pids+=("$!")
    background_pids+=("$!")
  done
  # shellcheck disable=SC2046
  env $(torchrun_env 0) timeout "$run_limit_s" "$bin" "$@" >"$out" 2>"$err"
  rc=$?
  dp_rc=0
  for pid in "${pids[@]}"; do wait "$pid" || dp_rc=$?; done
  if [ "$rc" -ne "${dp_want_rc:-0}" ] || [ "$dp_rc" -ne "${dp_want_rc:-0}" ]; then
    [ ! -s "$out.rank1" ] || sed -n '1,30s/^/     rank 1: /p' "$out.rank1"
    fail "exit status rank 0: $rc, rank 1: $dp_rc, expected ${dp_want_rc:-0}"
  fi
}

# cli.data_parallel.verify
verify() {
  dp_run 2 verify --model gpt2-tiny --batch 8 --seq-len 32 --lengths variable --device cpu --threads 1
  check "data parallel verify: header names 2 ranks, every split passes" py '
text = open(sys.argv[1], encoding="utf-8").read()
if "data parallel over 2 ranks" not in text: fail("no world size in the header")
rows = split_rows(sys.argv[1])
if len(rows) != 3 or not all(r.endswith("PASS") for r in rows): fail("rows %s" % rows)
' "$out"
  check "data parallel verify: rank 1 prints nothing" test ! -s "$out.rank1"
}

# cli.data_parallel.verify_lists: two jobs of an optimizer list, one process group each in turn.
verify_lists() {
  dp_run 2 verify --model gpt2-tiny --batch 8 --seq-len 32 --lengths variable --optimizer adamw,sgd --micro-batches 2,4 \
    --device cpu --threads 1
  check "data parallel verify of a list: both jobs pass over 2 ranks, the last line says so" py '
text = open(sys.argv[1], encoding="utf-8").read()
if text.count("data parallel over 2 ranks") != 2: fail("not two jobs over 2 ranks")
rows = split_rows(sys.argv[1])
if len(rows) != 4 or not all(r.endswith("PASS") for r in rows): fail("rows %s" % rows)
if "PASS in every job of the lists (2)" not in text: fail("no last line")
' "$out"
  check "data parallel verify of a list: rank 1 prints nothing" test ! -s "$out.rank1"
}

# cli.data_parallel.verify_clipping: SGD clipped at 0.01 over 2 ranks: every rank clips the summed
# gradient by the same norm, so each split keeps the whole batch's update (the reference runs alone).
verify_clipping() {
  dp_run 2 verify --model gpt2-tiny --batch 8 --seq-len 32 --lengths variable --optimizer sgd --max-grad-norm 0.01 \
    --device cpu --threads 1
  dp_verify_check "data parallel verify with clipping: the norm is said, every split passes" \
    "clipping at 0.01 (--max-grad-norm)"
}

# dp_verify_check WHAT TEXT: the two-rank verify in $out says its world size and TEXT, and each of
# its 3 splits passes.
dp_verify_check() {
  check "$1" py '
text = open(sys.argv[1], encoding="utf-8").read()
if "data parallel over 2 ranks" not in text: fail("no world size in the header")
if sys.argv[2] not in text: fail("no %r" % sys.argv[2])
rows = split_rows(sys.argv[1])
if len(rows) != 3 or not all(r.endswith("PASS") for r in rows): fail("rows %s" % rows)
' "$out" "$2"
}

# cli.data_parallel.sweep
sweep() {
  # With a --time-budget: every rank decides on rank 0's times, so both run the same rounds.
  tiny_args --batch 8 --time-budget 2 --json "$work/dp.json"
  dp_run 2 sweep "${args[@]}"
  check "data parallel sweep: JSON has world size 2, gloo, an allreduce phase, all ranks' tokens" py '
r = load(sys.argv[1])
c = r["context"]
if (c["world_size"], c["distributed_backend"]) != (2, "gloo"): fail("context %s %s" % (c["world_size"], c["distributed_backend"]))
splits = sorted((x["config"]["micro_batch"], x["config"]["accum_steps"]) for x in r["runs"])
if splits != [(1, 4), (2, 2), (4, 1)]: fail("splits %s (4 sequences per rank)" % splits)
if r["recommendation"]["decision"]["rounds"] < 2: fail("decision %s" % r["recommendation"]["decision"])
for x in r["runs"]:
    if x["config"]["world_size"] != 2: fail("run world size %s" % x["config"]["world_size"])
    if not x["phase_median_seconds"]["allreduce"] > 0: fail("no allreduce time in %s" % key(x))
    if x["tokens_per_step"] != 8 * 32: fail("tokens per step %s, expected 256 (both ranks)" % x["tokens_per_step"])
    if [(s["positions"], s["computed_positions"]) for s in x["steps"]] != [(256, 256)] * len(x["steps"]):
        fail("%s: positions %s, expected 256 a step (both ranks)" % (key(x), [s["positions"] for s in x["steps"]]))
    # samples/s, tokens/s and MFU count both ranks: 8 sequences of 32 per median step.
    if abs(x["samples_per_second"] * x["step_seconds"]["median"] - 8) > 1e-6: fail("%s: samples/s %s" % (key(x), x["samples_per_second"]))
    if len(x["steps"]) < 2 or [s["round"] for s in x["steps"]][:2] != [0, 1]: fail("%s: rounds %s" % (key(x), [s["round"] for s in x["steps"]]))
' "$work/dp.json"
  check "data parallel sweep: console shows the allreduce column" grep -q "allreduce ms" "$out"
  check "data parallel sweep: rank 1 prints nothing" test ! -s "$out.rank1"
  # Plan within 2 % (bucket copies included). It allowed 10 % while a bucket's flat copy stayed
  # alive after its all-reduce was waited for, until Gloo's worker thread let go of the work that
  # held it: a whole set of gradients above the plan in some steps (4.02 MB against 3.43 at 2×2
  # under ctest -j2, 2026-12-07); PendingReduce::wait now frees it (set_), and six loaded two-rank
  # sweeps measured every split within 68 bytes of it. Measured again, up to twice, as dp_sweep_within_plan does.
  local attempt
  for attempt in 1 2; do
    if peaks_within 2 "$work/dp.json" >/dev/null; then break; fi
    echo "     (data parallel sweep: rank 0's peaks off the plan by more than 2 %: $(peaks_within 2 "$work/dp.json"); measured once more)"
    dp_run 2 sweep "${args[@]}"
  done
  plan_within_peaks "data parallel sweep" 2 "$work/dp.json"
}

# cli.data_parallel.lora_plan: LoRA over two ranks, where the adapters' gradients and their bucket's
# flat copy (alive until the all-reduce is waited for) hold the peak: rank 0's plan within 5 % of
# its measured peaks (gpt2-tiny r64 on every linear at T=8: 3,218,944 planned against 3,219,464 and
# 3,235,852 bytes measured alone, 2026-12-04; the plan without the copy was 12 % under). Under
# ctest's parallel load a bucket's copy once outlived its wait (3,350,544, −3.9 %), as
# cli.data_parallel.sweep notes for a full fine-tune; freed at the wait since 2026-12-07.
lora_plan() {
  tiny_args --batch 4 --seq-len 8 --lora-rank 64 --lora-targets all-linear --json "$work/dp-lora.json"
  dp_sweep_within_plan "data parallel LoRA sweep" 2 "$work/dp-lora.json" "${args[@]}"
}

# plan_within_peaks WHAT PERCENT FILE...: two ranks' results files, every run's plan within PERCENT
# of its measured peak.
plan_within_peaks() {
  local what=$1 percent=$2
  shift 2
  check "$what: plan within $percent % of every split's measured peak" peaks_within "$percent" "$@"
}

# dp_sweep_within_plan WHAT PERCENT JSON SWEEP_ARGS...: a two-rank sweep writing JSON, every split's
# plan within PERCENT of its measured peak. Until 2026-12-07 Gloo's worker held each bucket's copy
# past the wait on a loaded machine (cli.data_parallel.sweep; in one probe 3 first splits of 17
# were 12.7 % over their plan, none measured alone); a sweep off its plan is still measured again,
# up to twice, and the third stands, for what load may yet hold.
dp_sweep_within_plan() {
  local what=$1 percent=$2 json=$3
  shift 3
  local attempt
  for attempt in 1 2; do
    dp_run 2 sweep "$@"
    if peaks_within "$percent" "$json" >/dev/null; then return 0; fi
    echo "     ($what: rank 0's peaks off the plan by more than $percent %: $(peaks_within "$percent" "$json"); measured once more)"
  done
  dp_run 2 sweep "$@"
  plan_within_peaks "$what" "$percent" "$json"
}

# peaks_within PERCENT FILE...: succeeds when every run's plan is within PERCENT of its peak; else
# prints the first that is not.
peaks_within() {
  local percent=$1
  shift
  py '
bar = float(sys.argv[1]) / 100
for path in sys.argv[2:]:
    r = load(path)
    if r["context"]["world_size"] != 2: fail("world size %s" % r["context"]["world_size"])
    for x in r["runs"]:
        error = (x["predicted_peak_bytes"] - x["peak_allocated_bytes"]) / x["peak_allocated_bytes"]
        if abs(error) > bar: fail("%s %s %s: plan %s vs measured %s bytes, %+.2f %%" % (
            r["context"]["model"], key(x), x["config"]["packing"], x["predicted_peak_bytes"],
            x["peak_allocated_bytes"], 100 * error))
' "$percent" "$@"
}

# cli.data_parallel.packing_list_plan: a --packing list over two ranks on the CPU, where every rank
# holds each packing's whole-step batches and each split with several micro-batches per rank a copy
# of its share: rank 0's plan within 4 % of every split's measured peak (each within 12 bytes alone,
# 2026-12-06; the plan that counted one rank's share of each packing's batches was 8 % under at
# three packings). The 4 % leaves room for the buffers Gloo may still hold under ctest's load.
packing_list_plan() {
  tiny_args --batch 32 --seq-len 256 --micro-batches 1,16 --lengths "$data/../../docs/examples/chat_lengths.txt" \
    --packing none,bfd,wrapped --json "$work/dp-packings.json"
  dp_sweep_within_plan "data parallel packing list" 4 "$work/dp-packings.json" "${args[@]}"
  check "data parallel packing list: every packing measured" py '
if sorted({x["config"]["packing"] for x in load(sys.argv[1])["runs"]}) != ["bfd", "none", "wrapped"]: fail("packings")
' "$work/dp-packings.json"
}

# cli.data_parallel.distinct_steps_plan: --distinct-steps epoch over two ranks with a packing list,
# where each packing passes over the file in its own count of steps (16 unpacked, 4 bfd, 4 wrapped
# at T=256, batch 32), every rank keeps them all, and a split with several micro-batches per rank
# copies its share of each of its packing's steps for the rounds: every split within 1.5 % of its
# measured peak (each within 12 bytes alone, 2026-12-06; by the plan's own terms, two steps of each
# packing counted instead of the epoch's 24 would leave 3,538,944 bytes out at 1×16, 27 % under).
distinct_steps_plan() {
  tiny_args --batch 32 --seq-len 256 --micro-batches 1,16 --lengths "$data/../../docs/examples/chat_lengths.txt" \
    --packing none,bfd,wrapped --distinct-steps epoch --json "$work/dp-epoch.json"
  dp_sweep_within_plan "data parallel epoch" 1.5 "$work/dp-epoch.json" "${args[@]}"
}

# cli.data_parallel.last_bucket_plan: at shapes where the moment the last bucket's all-reduce starts
# is the step's peak, accumulating splits hold the last gradient's incoming tensor there too
# (AccumulateGrad keeps it through the post-accumulate hook): GPT-2's position table, else the token
# embedding. Every split within 0.5 % of its measured peak (each within 12 bytes alone, 2026-12-06;
# 1×4 was 2.2 % under on gpt2-tiny and 4.1 % on llama-tiny before the term).
last_bucket_plan() {
  tiny_args --batch 8 --micro-batches 1,2,4 --json "$work/dp-gpt2.json"
  dp_sweep_within_plan "data parallel gpt2-tiny" 0.5 "$work/dp-gpt2.json" "${args[@]}"
  tiny_args --model llama-tiny --seq-len 8 --batch 8 --micro-batches 1,4 --json "$work/dp-llama.json"
  dp_sweep_within_plan "data parallel llama-tiny" 0.5 "$work/dp-llama.json" "${args[@]}"
}

# cli.data_parallel.verify_mean_of_means_skew: over two ranks mean-of-means divides each micro-batch's
# loss by its own targets, the accumulation steps and the world size (DDP's average): seven samples of
# 32 tokens and one of 30 weight the short one's micro-batch's tokens 2.5 % apart at 2×2, which bf16's
# bar (3e-2) cannot resolve; verify fails both splits by their counts and says so (it judged the
# skew in one process only before).
verify_mean_of_means_skew() {
  printf '32\n32\n32\n32\n32\n32\n32\n30\n' > "$work/seven.txt"
  dp_want_rc=1 dp_run 2 verify --model gpt2-tiny --seq-len 32 --batch 8 --lengths "$work/seven.txt" \
    --loss-normalization mean-of-means --precision bf16 --micro-batches 2,4 --device cpu --threads 1 --dist-timeout 60
  check "both splits fail within the tolerance, by their counts" \
    grep -q '^2×2, 4×1 fail within the tolerance: their micro-batches hold different numbers of targets, so mean-of-means weights their tokens up to 2.5 % apart' "$out"
}

# cli.data_parallel.mismatch: ranks started with different arguments stop, every one, with a
# sentence naming the option, before any collective.
mismatch() {
  local port
  port=$(free_port) || fail "no free port"
  last_command="WORLD_SIZE=2 ... accumbench verify --lr 0.001 (rank 1) / --lr 0.0001 (rank 0)"
  WORLD_SIZE=2 RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout "$run_limit_s" "$bin" verify \
    --model gpt2-tiny --batch 4 --seq-len 32 --device cpu --threads 1 --lr 0.001 --dist-timeout 60 >"$out.rank1" 2>&1 &
  local pid=$!
  background_pids+=("$pid")
  WORLD_SIZE=2 RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout "$run_limit_s" "$bin" verify \
    --model gpt2-tiny --batch 4 --seq-len 32 --device cpu --threads 1 --lr 0.0001 --dist-timeout 60 >"$out" 2>"$err"
  rc=$?
  local rc1=0
  wait "$pid" || rc1=$?
  [ "$rc" -eq 2 ] || fail "rank 0 exited $rc, expected 2"
  [ "$rc1" -eq 2 ] || fail "rank 1 exited $rc1, expected 2"
  check "rank 0 names rank 1's --lr" grep -q 'rank 1 was started with "lr=0.001"' "$err"
  check "rank 1 names rank 0's --lr" grep -q 'rank 0 was started with "lr=0.0001"' "$out.rank1"
  # An option recorded only when set (here the clipping) is compared by name, its default where a
  # rank lacks it: not with whatever option happens to follow in the other rank's list.
  port=$(free_port) || fail "no free port"
  last_command="WORLD_SIZE=2 ... accumbench verify --max-grad-norm 0.5 (rank 1) / none (rank 0)"
  WORLD_SIZE=2 RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout "$run_limit_s" "$bin" verify \
    --model gpt2-tiny --batch 4 --seq-len 32 --device cpu --threads 1 --max-grad-norm 0.5 --dist-timeout 60 >"$out.rank1" 2>&1 &
  pid=$!
  background_pids+=("$pid")
  WORLD_SIZE=2 RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout "$run_limit_s" "$bin" verify \
    --model gpt2-tiny --batch 4 --seq-len 32 --device cpu --threads 1 --dist-timeout 60 >"$out" 2>"$err"
  rc=$?
  rc1=0
  wait "$pid" || rc1=$?
  [ "$rc" -eq 2 ] || fail "rank 0 exited $rc, expected 2"
  [ "$rc1" -eq 2 ] || fail "rank 1 exited $rc1, expected 2"
  check "rank 0 names both ranks' clipping" \
    grep -q 'rank 1 was started with "max_grad_norm=0.5", rank 0 with "max_grad_norm=0"; start every rank with the same arguments' "$err"
}

# cli.data_parallel.launch_mismatch: ranks that disagree on what the arguments do not show stop with
# exit 2 and the difference named: another subcommand; the same --lengths path holding other
# lengths (each rank reads its own copy, as on two machines); another WORLD_SIZE (rank 1 names it,
# rank 0 gives up waiting at --dist-timeout).
# pair DIR1 WORLD1 DIR0 WORLD0 -- ARGS1 -- ARGS0: rank 1 and rank 0 from their directories; rank 0's
# status in $rc, its stdout/stderr in $out/$err, rank 1's status in $rc1 and its output in $out.rank1.
pair() {
  local dir1=$1 world1=$2 dir0=$3 world0=$4 port
  shift 5
  local args1=() args0=()
  while [ "$1" != "--" ]; do args1+=("$1"); shift; done
  shift
  args0=("$@")
  port=$(free_port) || fail "no free port"
  last_command="accumbench ${args1[*]} (rank 1, WORLD_SIZE=$world1) / ${args0[*]} (rank 0, WORLD_SIZE=$world0)"
  (cd "$dir1" && WORLD_SIZE=$world1 RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout "$run_limit_s" "$bin" \
    "${args1[@]}" >"$out.rank1" 2>&1) &
  local pid=$!
  background_pids+=("$pid")
  (cd "$dir0" && WORLD_SIZE=$world0 RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout "$run_limit_s" "$bin" \
    "${args0[@]}" >"$out" 2>"$err")
  rc=$?
  rc1=0
  wait "$pid" || rc1=$?
}

launch_mismatch() {
  local tiny=(--model gpt2-tiny --seq-len 32 --device cpu --threads 1 --dist-timeout 8)
  pair "$work" 2 "$work" 2 -- sweep "${tiny[@]}" --batch 4 --steps 2 --warmup 1 -- verify "${tiny[@]}" --batch 4
  [ "$rc" -eq 2 ] && [ "$rc1" -eq 2 ] || fail "exits $rc (rank 0) and $rc1 (rank 1), expected 2 and 2"
  check "rank 0 names rank 1's subcommand" grep -q 'rank 1 was started with "command=sweep", rank 0 with "command=verify"' "$err"
  mkdir -p "$work/a" "$work/b"
  printf '3\n30\n5\n12\n' > "$work/a/lengths.txt"
  printf '3\n30\n5\n13\n' > "$work/b/lengths.txt"
  pair "$work/b" 2 "$work/a" 2 -- verify "${tiny[@]}" --batch 4 --lengths lengths.txt -- verify "${tiny[@]}" --batch 4 --lengths lengths.txt
  [ "$rc" -eq 2 ] && [ "$rc1" -eq 2 ] || fail "exits $rc (rank 0) and $rc1 (rank 1), expected 2 and 2"
  check "verify: rank 0 names the lengths file's content" grep -q 'rank 1 was started with "lengths_file_fingerprint=.*give every rank the same file content' "$err"
  # --resume from copies that differ (rank 1's holds other times): refused, rank 0's file untouched.
  local sweep_args=(sweep "${tiny[@]}" --batch 4 --steps 2 --warmup 1 --time-budget 0 --json k.json)
  dp_run 2 "${sweep_args[@]/k.json/$work/a/k.json}"
  py 'import json, sys
d = json.load(open(sys.argv[1])); d["runs"][0]["steps"][0]["step_seconds"] *= 2; json.dump(d, open(sys.argv[2], "w"))' \
    "$work/a/k.json" "$work/b/k.json"
  local before
  before=$(cat "$work/a/k.json")
  pair "$work/b" 2 "$work/a" 2 -- "${sweep_args[@]}" --resume k.json -- "${sweep_args[@]}" --resume k.json
  [ "$rc" -eq 2 ] && [ "$rc1" -eq 2 ] || fail "exits $rc (rank 0) and $rc1 (rank 1), expected 2 and 2"
  check "resume: rank 0 names the copies' difference" grep -q 'rank 1 was started with "resume=2 runs, 4 timed steps (.*give every rank a copy of the same --resume file' "$err"
  check "resume: rank 0's file is untouched" test "$before" = "$(cat "$work/a/k.json")"
  pair "$work" 3 "$work" 2 -- verify "${tiny[@]}" --batch 12 -- verify "${tiny[@]}" --batch 12
  [ "$rc" -eq 2 ] && [ "$rc1" -eq 2 ] || fail "exits $rc (rank 0) and $rc1 (rank 1), expected 2 and 2"
  check "rank 1 names both WORLD_SIZEs" grep -q 'rank 1 was started with WORLD_SIZE=3, rank 0 at 127.0.0.1:[0-9]* with WORLD_SIZE=2; start every rank with the same WORLD_SIZE' "$out.rank1"
}

# cli.data_parallel.bf16_weights_over_gloo: a full fine-tune of bf16 weights over Gloo (which
# cannot all-reduce bf16: "Invalid scalar type" at the first gradient, PyTorch issue 111131) is
# refused by both ranks alike, with exit 2, before they join; so are LoRA's bf16 adapters.
bf16_gloo() {
  dp_want_rc=2 dp_run 2 verify --model gpt2-tiny --batch 4 --seq-len 32 --device cpu --threads 1 \
    --weights-dtype bf16 --dist-timeout 60
  check "rank 0 names Gloo and bf16 gradients" grep -q 'Gloo cannot all-reduce bf16 gradients' "$err"
  check "rank 1 too" grep -q 'Gloo cannot all-reduce bf16 gradients' "$out.rank1"
  # LoRA's bf16 adapters have bf16 gradients too (they failed mid-run with "Invalid scalar type",
  # blamed on a rank that left).
  dp_want_rc=2 dp_run 2 sweep --model gpt2-tiny --batch 4 --seq-len 32 --device cpu --threads 1 --warmup 1 --steps 2 \
    --lora-rank 4 --adapter-dtype bf16 --precision bf16 --dist-timeout 60
  check "bf16 adapters: rank 0 names the option and its fix" grep -q -- '--adapter-dtype bf16 trains bf16 adapters; use --adapter-dtype fp32' "$err"
  check "bf16 adapters: rank 1 too" grep -q -- '--adapter-dtype bf16 trains bf16 adapters' "$out.rank1"
}

# Two ranks verify with a data option ("padding longest", "packing bfd"): the header names it and
# every split passes, the loss divided by the real target tokens of the whole step over both ranks.
dp_verify_passes_with() {
  local option=$1 value=$2
  dp_run 2 verify --model gpt2-tiny --batch 8 --seq-len 32 --lengths "$data/lengths/skewed.txt" \
    "--$option" "$value" --device cpu --threads 1
  dp_verify_check "data parallel verify, $option $value: 2 ranks, every split passes" "$option $value"
}

# cli.data_parallel.verify_longest_padding: each rank trims its own micro-batches to their longest
# sample.
verify_longest_padding() { dp_verify_passes_with padding longest; }

# cli.data_parallel.verify_bfd: each rank takes its share of the packed rows (with their documents).
verify_bfd() { dp_verify_passes_with packing bfd; }

# cli.data_parallel.verify_label_masks: prompt-completion rows (completion_mask) over 2 ranks: each
# rank's micro-batches hold few counted targets, all divided by the whole step's count, so every
# split keeps the whole batch's update.
verify_label_masks() {
  dp_run 2 verify --model gpt2-tiny --batch 8 --seq-len 32 --lengths "$data/lengths/prompt_completion.jsonl" \
    --padding longest --device cpu --threads 1
  dp_verify_check "data parallel verify over masked labels: 2 ranks, the labels line, every split passes" \
    "completion_mask keeps 93 of 231 targets"
}

# cli.data_parallel.dead_peer: rank 1 killed with -9 once rank 0 has saved timed steps; rank 0 ends
# with exit 1 and one sentence (no abort on an uncaught Gloo exception), its JSON keeping the
# finished splits.
dead_peer() {
  local port json=$work/dead.json
  port=$(free_port) || fail "no free port"
  tiny_args --batch 8 --steps 300 --dist-timeout 30 --json "$json"
  last_command="WORLD_SIZE=2 accumbench sweep ${args[*]} (rank 1 killed with -9)"
  (WORLD_SIZE=2 RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port exec "$bin" sweep "${args[@]}" >"$out.rank1" 2>&1) &
  local rank1=$!
  background_pids+=("$rank1")
  (WORLD_SIZE=2 RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port exec timeout "$run_limit_s" "$bin" sweep "${args[@]}" \
    >"$out" 2>"$err") &
  local rank0=$!
  background_pids+=("$rank0")
  local deadline=$((SECONDS + run_limit_s))
  while [ "$SECONDS" -lt "$deadline" ] && kill -0 "$rank0" 2>/dev/null; do
    # Killed once the timed rounds have begun (a save with timed steps), so that the loss falls
    # mid-round as a rule: what the rounds' counts below are checked for.
    if python3 -c 'import json, sys; sys.exit(0 if any(r.get("steps") for r in json.load(open(sys.argv[1]))["runs"]) else 1)' \
      "$json" 2>/dev/null; then break; fi
    sleep 0.1
  done
  kill -9 "$rank1" 2>/dev/null
  rc=0
  wait "$rank0" || rc=$?
  [ "$rc" -eq 1 ] || fail "rank 0 exited $rc, expected 1 (a peer gone ends the run)"
  check "rank 0 says why in one sentence" grep -q "accumbench: error: an all-reduce with the other ranks failed" "$err"
  check "rank 0 prints the table of what was finished, which says the error stopped it" \
    grep -q "^Recommendation: .*Stopped by an error (an all-reduce with the other ranks failed" "$out"
  check "and names the file it saved" grep -q "^accumbench: wrote $json$" "$err"
  check "an error, not a signal, stopped its rounds" bash -c '! grep -q "(interrupted)" "$1"' _ "$out"
  check "no abort and no uncaught exception" py '
text = open(sys.argv[1], encoding="utf-8").read()
if "terminate called" in text or "internal error" in text: fail(text[:300])
' "$err"
  check "the finished splits are saved, in a file that says the error ended the sweep" py '
r = load(sys.argv[1])
if not any(x["status"] == "ok" for x in r["runs"]): fail("no finished split in %s" % [x["status"] for x in r["runs"]])
stop = r["interruption"]
if "all-reduce with the other ranks failed" not in stop["error"] or stop["saved_while_running"]: fail("interruption %s" % stop)
reason = r["recommendation"]["reason"]
if not reason.startswith("Stopped by an error (an all-reduce with the other ranks failed"):
    fail("reason %s" % reason[:200])
import re
# helper-101: "stopped after 3" beside "Undecided after 4 rounds" (a round the loss cut short counted once).
stopped = re.search(r"timed rounds stopped (?:after|during round) (\d+)", reason)
undecided = re.search(r"Undecided after (\d+) rounds? \(stopped by an error\)", reason)
if stopped and undecided and stopped.group(1) != undecided.group(1): fail("rounds counted apart: %s" % reason[:400])
' "$json"
}

# cli.data_parallel.oom_one_rank: one rank runs out of memory in one split, the other does not.
# half_long.txt holds four samples of 128 tokens and four of 4; --group-by-length puts the four
# long ones first, so rank 0's share is 4 x 128 tokens and rank 1's 4 x 4 (--padding longest trims
# each micro-batch to its longest sample). Rank 0's peaks without a limit, measured: 4.88 MB at 1x4,
# 7.31 MB at 2x2, 11.58 MB at 4x1 (2026-11-30, the same in two runs); a limit of 9 MiB (9.44 MB)
# lets rank 0 run 1x4 and 2x2 but not 4x1, with about 2 MB to spare either way; rank 1 fits
# everything. Rank 0 still posts the step's bucket all-reduces (with zeros),
# so rank 1 is not left waiting: both ranks exit 0, and the JSON records 4x1 as oom, naming rank 0,
# and the other splits as ok.
oom_one_rank() {
  local json=$work/oom.json
  tiny_args --seq-len 128 --batch 8 --lengths "$data/lengths/half_long.txt" --group-by-length --padding longest \
    --memory-limit 9437184B --try-predicted-oom --dist-timeout 60 --json "$json"
  dp_run 2 sweep "${args[@]}"
  check "data parallel, one rank out of memory: 4x1 is oom on rank 0 (and does not fit), 1x4 and 2x2 are ok" py '
r = load(sys.argv[1])
status = {(x["config"]["micro_batch"], x["config"]["accum_steps"]): (x["status"], x.get("error", "")) for x in r["runs"]}
if sorted(status) != [(1, 4), (2, 2), (4, 1)]: fail("splits %s" % sorted(status))
if status[(4, 1)][0] != "oom": fail("4x1: %s" % (status[(4, 1)],))
if not status[(4, 1)][1].startswith("rank 0: "): fail("4x1 error does not name rank 0: %s" % status[(4, 1)][1])
if any(x["fits"] for x in r["runs"] if x["status"] != "ok"): fail("a failed split marked as fitting")
for split in [(1, 4), (2, 2)]:
    if status[split][0] != "ok": fail("%s: %s" % (split, status[split]))
' "$json"
  check "data parallel, one rank out of memory: rank 1 prints nothing" test ! -s "$out.rank1"
}

# cli.data_parallel.join_notice: rank 1 never starts. After a few seconds rank 0 says once whom it
# waits for, and at --dist-timeout it stops with exit 2 and a sentence.
join_notice() {
  local port
  port=$(free_port) || fail "no free port"
  tiny_args --dist-timeout 8
  last_command="WORLD_SIZE=2 RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port accumbench sweep ${args[*]} (no rank 1)"
  WORLD_SIZE=2 RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout "$run_limit_s" "$bin" sweep "${args[@]}" \
    >"$out" 2>"$err"
  rc=$?
  [ "$rc" -eq 2 ] || fail "rank 0 exited $rc, expected 2"
  check "rank 0 says once whom it waits for" py '
text = open(sys.argv[1], encoding="utf-8").read()
line = "accumbench: waiting for 1 rank at 127.0.0.1:" + sys.argv[2]
if text.count(line) != 1: fail("%d times %r in %r" % (text.count(line), line, text[:400]))
if "could not join the process group" not in text or "1 of 2 ranks joined within 8 s" not in text: fail(text[:400])
' "$err" "$port"
}

# cli.data_parallel.port_in_use: MASTER_PORT held by another process. Rank 0 exits 2 with one line
# on stderr, the sentence that names the port and the fix (glog's socket lines muted before it).
port_in_use() {
  local holder port
  holder=$(mktemp)
  python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
print(s.getsockname()[1], flush=True); time.sleep(60)' >"$holder" &
  local pid=$!
  for _ in $(seq 50); do [ -s "$holder" ] && break; sleep 0.1; done
  port=$(cat "$holder")
  rm -f "$holder"
  [ -n "$port" ] || fail "no port held"
  tiny_verify_args --dist-timeout 8
  last_command="WORLD_SIZE=2 RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port accumbench verify ${args[*]} (port held)"
  WORLD_SIZE=2 RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout "$run_limit_s" "$bin" verify "${args[@]}" \
    >"$out" 2>"$err"
  rc=$?
  kill "$pid" 2>/dev/null
  [ "$rc" -eq 2 ] || fail "rank 0 exited $rc, expected 2"
  check "one line on stderr: the port and the fix" py '
lines = open(sys.argv[1], encoding="utf-8").read().splitlines()
want = "accumbench: error: MASTER_PORT " + sys.argv[2] + " is already in use on rank 0\x27s machine (127.0.0.1), " \
       "by another job or another process started with RANK=0; give each process its own RANK, and every rank a " \
       "free MASTER_PORT"
if lines != [want]: fail("%r" % lines)
' "$err" "$port"
}

# cli.data_parallel.duplicate_rank: two processes started as RANK=1 of a world of 3 whose rank 2
# never starts, so that rank 0's store lives until --dist-timeout whenever the twins connect (in a
# world of 2, a twin slower to start than the job to finish found no store left, and waited its
# timeout). The twin that joins second is refused at once: exit 2, one sentence naming the RANK.
duplicate_rank() {
  local port first second zero
  port=$(free_port) || fail "no free port"
  tiny_verify_args --batch 6 --dist-timeout 20
  last_command="WORLD_SIZE=3 RANK=0, RANK=1 twice, MASTER_ADDR=127.0.0.1 MASTER_PORT=$port accumbench verify ${args[*]}"
  WORLD_SIZE=3 RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout "$run_limit_s" "$bin" verify "${args[@]}" \
    >"$out" 2>"$err" &
  zero=$!
  background_pids+=("$zero")
  WORLD_SIZE=3 RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout "$run_limit_s" "$bin" verify "${args[@]}" \
    >"$out.a" 2>&1 &
  first=$!
  background_pids+=("$first")
  WORLD_SIZE=3 RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout "$run_limit_s" "$bin" verify "${args[@]}" \
    >"$out.b" 2>&1 &
  second=$!
  background_pids+=("$second")
  rc=0
  wait "$zero" || rc=$?
  local rc_a=0 rc_b=0
  wait "$first" || rc_a=$?
  wait "$second" || rc_b=$?
  [ "$rc" -eq 2 ] || fail "rank 0 exited $rc, expected 2 (rank 2 never joins)"
  check "both RANK=1 processes exit 2, one of them refused as the twin" py '
if [int(sys.argv[3]), int(sys.argv[4])] != [2, 2]: fail("the two RANK=1 processes exited %s, %s" % (sys.argv[3], sys.argv[4]))
texts = [open(p, encoding="utf-8").read() for p in (sys.argv[1], sys.argv[2])]
want = "accumbench: error: another process already joined the process group at 127.0.0.1:" + sys.argv[5] + \
       " as RANK=1; give each process its own RANK, 0 to WORLD_SIZE-1"
if sum(t.strip().splitlines() == [want] for t in texts) != 1: fail("%r" % texts)
' "$out.a" "$out.b" "$rc_a" "$rc_b" "$port"
}

mode=${case_args[0]:-}
case $mode in
  verify | verify_lists | verify_clipping | verify_label_masks | sweep | lora_plan | packing_list_plan | distinct_steps_plan | last_bucket_plan | verify_mean_of_means_skew | mismatch | launch_mismatch | verify_longest_padding | verify_bfd | dead_peer | oom_one_rank | join_notice | port_in_use | bf16_gloo | duplicate_rank) "$mode" ;;
  *) echo "$case_name: unknown mode \"$mode\"" >&2; exit 2 ;;
esac
cli_pass
