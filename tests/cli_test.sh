#!/usr/bin/env bash
# End-to-end tests of the accumbench command line (ctest: cli).
#
#   tests/cli_test.sh ACCUMBENCH_BINARY TESTS_DATA_DIR
#
# Every user mistake must exit 2 with one plain sentence on stderr that names the problem (no C++
# backtrace, nothing on stdout); the success paths must exit 0 and write what they promise;
# `verify` exits 1 when a split computes a different update; a sweep killed with -9 leaves valid
# JSON that --resume finishes without measuring the same split twice. Each check prints "ok" or
# "FAIL" (with the command and its output); the last line is "N passed, M failed" and the exit
# status is 1 if any check failed. Token files and broken result files are made in a scratch
# directory at test time.
#
# Every run uses the tiny model on one CPU thread: with every hardware thread (the default), other
# processes on a busy two-core machine make LibTorch's thread pool about 50x slower. Starting the
# binary costs about a second (loading LibTorch), so independent checks run in parallel
# (CLI_TEST_JOBS at a time, default 3) and their reports are printed in order. Nothing depends on
# timing except the kill -9 case, which polls the JSON file with a deadline.
set -uo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 ACCUMBENCH_BINARY TESTS_DATA_DIR" >&2
  exit 2
fi
bin=$1
data=$2
if [ ! -x "$bin" ]; then
  echo "cli_test: $bin is not an executable; build accumbench first" >&2
  exit 2
fi
if [ ! -d "$data/hf" ]; then
  echo "cli_test: $data/hf does not exist; pass the tests/data directory" >&2
  exit 2
fi
if ! command -v python3 >/dev/null 2>&1; then
  echo "cli_test: python3 is needed to read the JSON results" >&2
  exit 2
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/accumbench-cli.XXXXXX") || exit 2
job_pids=()
cleanup() {
  local pid
  for pid in "${job_pids[@]}"; do kill "$pid" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT

# A run that hangs must not hang ctest; the longest run here takes a few seconds.
run_limit_s=120
max_jobs=${CLI_TEST_JOBS:-3}

passed=0
failed=0
out=$tmp/out      # stdout of the last command (each parallel job has its own)
err=$tmp/err      # stderr of the last command
rc=0              # exit status of the last command
last_command=""   # shown when a check fails; empty for checks that are not a command's output

pass() {
  passed=$((passed + 1))
  echo "ok   $1"
}

# fail NAME REASON: also shows the last command and its output, so a failure explains itself.
fail() {
  failed=$((failed + 1))
  echo "FAIL $1: $2"
  if [ -n "$last_command" ]; then
    echo "     command: $last_command"
    if [ -s "$out" ]; then sed -n '1,15s/^/     stdout: /p' "$out"; fi
    if [ -s "$err" ]; then sed -n '1,15s/^/     stderr: /p' "$err"; fi
  fi
}

# run ARGS...: runs accumbench with ARGS, capturing stdout, stderr and the exit status.
run() {
  last_command="accumbench $*"
  timeout "$run_limit_s" "$bin" "$@" >"$out" 2>"$err"
  rc=$?
}

# missing_patterns FILE... -- PATTERN...: prints the first pattern found in none of the files.
missing_patterns() {
  local files=()
  while [ "$1" != "--" ]; do files+=("$1"); shift; done
  shift
  local p
  for p in "$@"; do
    if ! cat "${files[@]}" | grep -qF -- "$p"; then
      printf '%s' "$p"
      return 0
    fi
  done
  return 1
}

# expect NAME RC PATTERN... -- ARGS...: accumbench ARGS exits with RC and its stdout or stderr
# contains every PATTERN (fixed strings).
expect() {
  local name=$1 want_rc=$2
  shift 2
  local patterns=()
  while [ "$1" != "--" ]; do patterns+=("$1"); shift; done
  shift
  run "$@"
  if [ "$rc" -ne "$want_rc" ]; then
    fail "$name" "exit status $rc, expected $want_rc"
    return 1
  fi
  local missing
  if missing=$(missing_patterns "$out" "$err" -- "${patterns[@]}"); then
    fail "$name" "output lacks \"$missing\""
    return 1
  fi
  pass "$name"
}

# expect_user_error NAME PATTERN... -- ARGS...: accumbench ARGS is a user mistake: exit 2,
# nothing on stdout, exactly one stderr line "accumbench: error: ..." containing every PATTERN,
# and no sign of an uncaught C++ exception.
expect_user_error() {
  local name=$1
  shift
  local patterns=()
  while [ "$1" != "--" ]; do patterns+=("$1"); shift; done
  shift
  run "$@"
  if [ "$rc" -ne 2 ]; then
    fail "$name" "exit status $rc, expected 2 (a user error)"
    return 1
  fi
  local lines
  lines=$(wc -l <"$err")
  if [ "$lines" -ne 1 ]; then
    fail "$name" "stderr has $lines lines, expected one sentence"
    return 1
  fi
  if ! grep -q '^accumbench: error: ' "$err"; then
    fail "$name" "stderr does not start with \"accumbench: error: \""
    return 1
  fi
  if grep -qE 'terminate called|what\(\)|Exception raised from|frame #|c10::Error|\.cpp:[0-9]+' "$err"; then
    fail "$name" "stderr shows a C++ exception or source location instead of a plain sentence"
    return 1
  fi
  if [ -s "$out" ]; then
    fail "$name" "a user error printed to stdout"
    return 1
  fi
  local missing
  if missing=$(missing_patterns "$err" -- "${patterns[@]}"); then
    fail "$name" "the message lacks \"$missing\""
    return 1
  fi
  pass "$name"
}

# check NAME COMMAND...: a check made by a shell command or python3; what it prints is the
# reason when it fails.
check() {
  local name=$1
  shift
  local why
  if why=$("$@" 2>&1); then
    pass "$name"
  else
    last_command=""
    fail "$name" "${why:-\"$*\" failed}"
  fi
}

# py CODE ARGS...: runs a python3 snippet with ARGS as sys.argv[1:]; fail(reason) exits 1.
py() {
  local code=$1
  shift
  python3 - "$@" <<EOF
import csv, json, sys
def fail(reason):
    print(reason)
    sys.exit(1)
def load(path):
    with open(path) as f:
        return json.load(f)
def key(run):
    c = run["config"]
    return "%dx%d %s ckpt=%s oib=%s%s" % (c["micro_batch"], c["accum_steps"], c["precision"],
                                           c["activation_checkpointing"], c["optimizer_in_backward"],
                                           " chunked" if c["chunked_loss"] else "")
def split_rows(path):
    """The console table's rows: lines whose first word is a split such as 2×4."""
    rows = []
    for line in open(path, encoding="utf-8"):
        words = line.split()
        if words and "×" in words[0] and words[0].split("×")[0].isdigit():
            rows.append(line.rstrip("\n"))
    return rows
$code
EOF
}

# tiny_args [OPTION VALUE | FLAG]...: sets the array `args` to the tiny sweep (gpt2-tiny, T=32,
# batch 4, one warmup and two timed steps, one CPU thread), with each given OPTION replacing its
# default (the CLI rejects an option given twice) and any other argument appended.
tiny_args() {
  local -A value=([--model]=gpt2-tiny [--seq-len]=32 [--batch]=4 [--warmup]=1 [--steps]=2
                  [--device]=cpu [--threads]=1)
  local order=(--model --seq-len --batch --warmup --steps --device --threads)
  local extra=()
  while [ $# -gt 0 ]; do
    if [ $# -ge 2 ] && [ -n "${value[$1]+set}" ]; then
      value[$1]=$2
      shift 2
    else
      extra+=("$1")
      shift
    fi
  done
  args=()
  local k
  for k in "${order[@]}"; do args+=("$k" "${value[$k]}"); done
  args+=("${extra[@]}")
}
# verify takes the model and shape options of the tiny sweep, but no --warmup or --steps.
tiny_verify=(--model gpt2-tiny --seq-len 32 --batch 4 --device cpu --threads 1)

# Parallel jobs. spawn COMMAND... runs a check (or a function of several) in the background
# with its own stdout/stderr files and writes its report to a numbered file; section TITLE
# queues a heading; collect waits for every job and prints the reports in the order queued,
# adding their ok/FAIL lines to the counts.
jobs_dir=$tmp/jobs
mkdir "$jobs_dir"
job_count=0
next_job_dir() {
  job_count=$((job_count + 1))
  job_dir=$jobs_dir/$(printf '%04d' "$job_count")
  mkdir "$job_dir"
}
section() {
  next_job_dir
  echo "== $*" >"$job_dir/report"
}
spawn() {
  next_job_dir
  (
    out=$job_dir/out
    err=$job_dir/err
    "$@"
  ) >"$job_dir/report" 2>&1 &
  job_pids+=("$!")
  while [ "$(jobs -rp | wc -l)" -ge "$max_jobs" ]; do wait -n; done
}
collect() {
  local pid report
  for pid in "${job_pids[@]}"; do wait "$pid"; done
  job_pids=()
  for report in "$jobs_dir"/*/report; do
    cat "$report"
    passed=$((passed + $(grep -c '^ok   ' "$report")))
    failed=$((failed + $(grep -c '^FAIL ' "$report")))
  done
  rm -rf "$jobs_dir"
  mkdir "$jobs_dir"
}

echo "== models"
# Run first, in this shell: the tiny model's vocabulary and positions are read from the listing
# so that the limits tested below follow it.
expect "models lists gpt2-124m" 0 "gpt2-124m" -- models
tiny_vocab=$(awk 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i } $1 == "gpt2-tiny" { print $col["vocab"] }' "$out")
tiny_max_t=$(awk 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i } $1 == "gpt2-tiny" { print $col["max_T"] }' "$out")
check "models gives gpt2-124m 124439808 parameters" \
  grep -qE '^gpt2-124m[[:space:]].*[[:space:]]124439808[[:space:]]' "$out"
check "models gives gpt2-tiny vocab 512 and 256 positions" \
  test "${tiny_vocab:-}" = 512 -a "${tiny_max_t:-}" = 256
tiny_vocab=${tiny_vocab:-512}
tiny_max_t=${tiny_max_t:-256}

# ---------------------------------------------------------------------------------------------
# Resume after kill -9: 4 splits × 31 steps take several seconds; kill the sweep as soon as the
# first split is in its JSON, then finish it with --resume (without --json: the help says resume
# keeps writing the file).
resume_after_kill() {
  local json=$tmp/resume.json
  tiny_args --batch 8 --steps 30 --json "$json"
  # exec: $! is accumbench itself, so kill -9 hits the sweep and not a shell around it.
  (exec "$bin" sweep "${args[@]}" >"$tmp/killed.out" 2>&1) &
  local pid=$!
  local finished=0 deadline=$((SECONDS + run_limit_s))
  runs_in() {  # the number of runs in a result file; 0 while it is absent or not yet valid JSON
    python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["runs"]))' "$1" 2>/dev/null || echo 0
  }
  while [ "$SECONDS" -lt "$deadline" ] && kill -0 "$pid" 2>/dev/null; do
    finished=$(runs_in "$json")
    if [ "$finished" -ge 1 ]; then break; fi
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  finished=$(runs_in "$json")
  if [ "$finished" -lt 1 ] || [ "$finished" -ge 4 ]; then
    last_command="accumbench sweep ${args[*]} (in the background, killed with -9)"
    cp "$tmp/killed.out" "$out"
    : >"$err"
    fail "sweep killed after some but not all splits" "its JSON held $finished of 4 runs when it was killed"
    return
  fi
  pass "sweep killed after $finished of 4 splits"
  check "the killed sweep's JSON is valid and holds its finished splits" py '
d = load(sys.argv[1])
if not d["runs"] or any(r["status"] != "ok" for r in d["runs"]): fail("runs %s" % d["runs"])
' "$json"
  cp "$json" "$tmp/killed.json"
  tiny_args --batch 8 --steps 30 --resume "$json"
  expect "resume finishes the sweep" 0 "8×1" "Recommendation:" -- sweep "${args[@]}" || return
  check "resume measured the rest and kept the earlier splits as they were" py '
before, after = load(sys.argv[1]), load(sys.argv[2])
keys = sorted(key(r) for r in after["runs"])
if keys != ["%s fp32 ckpt=none oib=False" % s for s in ("1x8", "2x4", "4x2", "8x1")]:
    fail("runs after resume %s" % keys)
if any(r["status"] != "ok" for r in after["runs"]): fail("a run failed")
median = {key(r): r["step_seconds"]["median"] for r in after["runs"]}
for r in before["runs"]:
    if median[key(r)] != r["step_seconds"]["median"]:
        fail("%s was measured again: %r then %r" % (key(r), r["step_seconds"]["median"], median[key(r)]))
' "$tmp/killed.json" "$json"
}
section "resume after kill -9"
spawn resume_after_kill

# ---------------------------------------------------------------------------------------------
section "user errors: model, shape, numbers"
tiny_args --model gpt2-125m
spawn expect_user_error "unknown preset" '"gpt2-125m"' "accumbench models" -- sweep "${args[@]}"
spawn expect_user_error "unknown preset (verify)" '"gpt2-125m"' "accumbench models" \
  -- verify "${tiny_verify[@]:2}" --model gpt2-125m
tiny_args --batch 6 --micro-batches 4
spawn expect_user_error "batch not divisible by micro-batch" "batch 6" "micro-batch 4" "divisible" -- sweep "${args[@]}"
spawn expect_user_error "batch not divisible (verify)" "batch 4" "micro-batch 3" \
  -- verify "${tiny_verify[@]}" --micro-batches 3
tiny_args --batch -4
spawn expect_user_error "negative batch" "--batch" "-4" -- sweep "${args[@]}"
tiny_args --seq-len 0
spawn expect_user_error "zero seq-len" "--seq-len" "positive" -- sweep "${args[@]}"
tiny_args --steps 0
spawn expect_user_error "zero steps" "--steps" "positive" -- sweep "${args[@]}"
tiny_args --warmup -1
spawn expect_user_error "negative warmup" "--warmup" "negative" -- sweep "${args[@]}"
tiny_args --micro-batches 0
spawn expect_user_error "zero micro-batch" "micro-batch" "0" -- sweep "${args[@]}"
tiny_args --micro-batches 2,-2
spawn expect_user_error "negative micro-batch" "micro-batch" "-2" -- sweep "${args[@]}"
# One split only, so that the run stays short while these are accepted.
tiny_args --threads -1 --micro-batches 4
spawn expect_user_error "negative threads" "--threads" "-1" -- sweep "${args[@]}"
tiny_args --time-budget -1 --micro-batches 4
spawn expect_user_error "negative time budget" "--time-budget" "-1" -- sweep "${args[@]}"
tiny_args --seq-len $((tiny_max_t + 1))
spawn expect_user_error "seq-len beyond the model's positions" "--seq-len $((tiny_max_t + 1))" \
  "$tiny_max_t positions" -- sweep "${args[@]}"

section "user errors: precision, device"
tiny_args --precision fp8
spawn expect_user_error "unknown precision" '"fp8"' "fp32" -- sweep "${args[@]}"
tiny_args --precision fp16
spawn expect_user_error "fp16 on the CPU (sweep)" "fp16" "CUDA" -- sweep "${args[@]}"
spawn expect_user_error "fp16 on the CPU (verify)" "fp16" "CUDA" -- verify "${tiny_verify[@]}" --precision fp16
tiny_args --lengths ragged
spawn expect_user_error "unknown --lengths" '"ragged"' "fixed or variable" -- sweep "${args[@]}"
tiny_args --loss-normalization mean
spawn expect_user_error "unknown --loss-normalization" '"mean"' "mean-of-means" -- sweep "${args[@]}"
tiny_args --device tpu
spawn expect_user_error "unknown device" '"tpu"' "cuda:N" -- sweep "${args[@]}"
tiny_args --cuda-graphs
spawn expect_user_error "--cuda-graphs on the CPU (sweep)" "--cuda-graphs" "--device cuda" -- sweep "${args[@]}"
spawn expect_user_error "--cuda-graphs on the CPU (verify)" "--cuda-graphs" "--device cuda" -- verify "${tiny_verify[@]}" --cuda-graphs
tiny_args --profile "$tmp/profile"
spawn expect_user_error "--profile without CUDA and Kineto" "--profile" "--device cuda" "Kineto" -- sweep "${args[@]}"
# Only meaningful where there is no GPU.
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q GPU; then
  section "(--device cuda without a GPU: skipped, this machine has a GPU)"
else
  tiny_args --device cuda
  spawn expect_user_error "--device cuda without a GPU" "no CUDA GPU" "--device cpu" -- sweep "${args[@]}"
fi

section "user errors: --hf-config"
tiny_args
no_model=("${args[@]:2}")   # the tiny sweep without --model, which --hf-config replaces
spawn expect_user_error "hf-config: broken JSON" "$data/hf/bad_syntax.json" "not valid JSON" "line 5" \
  -- sweep "${no_model[@]}" --hf-config "$data/hf/bad_syntax.json"
spawn expect_user_error "hf-config: unknown model_type" "$data/hf/bad_model_type.json" '"bert"' "llama" \
  -- sweep "${no_model[@]}" --hf-config "$data/hf/bad_model_type.json"
spawn expect_user_error "hf-config: missing field" "$data/hf/bad_missing_field.json" '"num_hidden_layers"' "missing" \
  -- sweep "${no_model[@]}" --hf-config "$data/hf/bad_missing_field.json"
spawn expect_user_error "hf-config: a string where a number belongs" "$data/hf/bad_type.json" '"hidden_size"' \
  -- sweep "${no_model[@]}" --hf-config "$data/hf/bad_type.json"
spawn expect_user_error "hf-config: kv heads do not divide heads" "$data/hf/bad_heads.json" "num_key_value_heads" \
  -- sweep "${no_model[@]}" --hf-config "$data/hf/bad_heads.json"
spawn expect_user_error "hf-config: missing file" "$tmp/no-such-config.json" \
  -- sweep "${no_model[@]}" --hf-config "$tmp/no-such-config.json"
spawn expect_user_error "hf-config: a directory" "$data/hf" "directory" -- sweep "${no_model[@]}" --hf-config "$data/hf"
spawn expect_user_error "hf-config: broken JSON (verify)" "$data/hf/bad_syntax.json" "not valid JSON" \
  -- verify "${tiny_verify[@]:2}" --hf-config "$data/hf/bad_syntax.json"

section "user errors: --tokens"
# One step of the tiny sweep reads batch × (seq-len + 1) = 4 × 33 = 132 tokens.
python3 - "$tmp" "$tiny_vocab" <<'EOF'
import struct, sys
d, vocab = sys.argv[1], int(sys.argv[2])
def write(name, fmt, ids):
    with open(d + "/" + name, "wb") as f:
        f.write(struct.pack("<%d%s" % (len(ids), fmt), *ids))
ok = [i % vocab for i in range(1000)]
write("good.u16", "H", ok)
write("good.u32", "I", ok)
write("short.u16", "H", ok[:131])
write("vocab_first.u16", "H", [vocab + 88] + ok[1:])
write("vocab_target.u16", "H", ok[:131] + [vocab] + ok[132:])
write("vocab.u32", "I", [70000] + ok[1:])
open(d + "/empty.u16", "wb").close()
open(d + "/odd.u16", "wb").write(b"\x01\x00\x02")
open(d + "/six.u32", "wb").write(b"\x00" * 6)
EOF
tiny_args
spawn expect_user_error "tokens: empty file" "$tmp/empty.u16" "empty" -- sweep "${args[@]}" --tokens "$tmp/empty.u16"
spawn expect_user_error "tokens: odd byte count for 2-byte ids" "$tmp/odd.u16" "3 bytes" "--token-bytes" \
  -- sweep "${args[@]}" --tokens "$tmp/odd.u16"
spawn expect_user_error "tokens: 6 bytes for 4-byte ids" "$tmp/six.u32" "6 bytes" "--token-bytes" \
  -- sweep "${args[@]}" --tokens "$tmp/six.u32" --token-bytes 4
spawn expect_user_error "tokens: id beyond the vocabulary (first token)" "token id $((tiny_vocab + 88))" "$tiny_vocab" \
  -- sweep "${args[@]}" --tokens "$tmp/vocab_first.u16"
spawn expect_user_error "tokens: id beyond the vocabulary (last target of step 1)" "token id $tiny_vocab" "position 131" \
  -- sweep "${args[@]}" --tokens "$tmp/vocab_target.u16"
spawn expect_user_error "tokens: 4-byte id beyond the vocabulary" "token id 70000" \
  -- sweep "${args[@]}" --tokens "$tmp/vocab.u32" --token-bytes 4
spawn expect_user_error "tokens: shorter than one step" "$tmp/short.u16" "131 tokens" "132" \
  -- sweep "${args[@]}" --tokens "$tmp/short.u16"
spawn expect_user_error "tokens: missing file" "$tmp/no-such.u16" -- sweep "${args[@]}" --tokens "$tmp/no-such.u16"
spawn expect_user_error "tokens: width 3" "width" "3" -- sweep "${args[@]}" --tokens "$tmp/good.u16" --token-bytes 3

section "user errors: --memory-limit, output paths"
tiny_args --memory-limit 12XB
spawn expect_user_error "memory-limit: garbage" "'12XB'" "GiB" -- sweep "${args[@]}"
tiny_args --memory-limit -5GiB
spawn expect_user_error "memory-limit: negative" "'-5GiB'" -- sweep "${args[@]}"
tiny_args --memory-limit 1KiB
spawn expect_user_error "memory-limit: below the weights" "1.0 KiB" "gpt2-tiny" -- sweep "${args[@]}"
tiny_args --json "$tmp/no-such-dir/a.json"
spawn expect_user_error "--json into a missing directory" "$tmp/no-such-dir/a.json" -- sweep "${args[@]}"

section "user errors: command line parsing"
spawn expect_user_error "unknown subcommand" "frobnicate" -- frobnicate
spawn expect_user_error "unknown option" "--frob" -- sweep --frob
spawn expect_user_error "stray argument" "extra" -- sweep --model gpt2-tiny extra
spawn expect_user_error "option given twice" "--batch" -- sweep --batch 4 --batch 8
spawn expect_user_error "not a number" "--batch" "abc" -- sweep --batch abc
spawn expect_user_error "report without a file" "results" -- report

section "report and compare on bad files"
printf '{"json_schema_version": 1, "runs": [' >"$tmp/broken.json"
printf '{"runs": []}\n' >"$tmp/foreign.json"
spawn expect_user_error "report: missing file" "$tmp/none.json" -- report "$tmp/none.json"
spawn expect_user_error "report: broken JSON" "$tmp/broken.json" "not valid JSON" -- report "$tmp/broken.json"
spawn expect_user_error "report: JSON not written by accumbench" "$tmp/foreign.json" "json_schema_version" \
  -- report "$tmp/foreign.json"
spawn expect_user_error "compare: broken JSON" "$tmp/broken.json" "not valid JSON" \
  -- compare "$tmp/broken.json" "$tmp/broken.json"
tiny_args --resume "$tmp/broken.json"
spawn expect_user_error "resume: broken JSON" "$tmp/broken.json" "not valid JSON" -- sweep "${args[@]}"

# ---------------------------------------------------------------------------------------------
# One sweep writes every format; report, compare, --memory-limit and --resume then read it.
sweep_and_reread() {
  tiny_args --json "$tmp/a.json" --csv "$tmp/a.csv" --markdown "$tmp/a.md" --html "$tmp/a.html" \
    --trace "$tmp/a.trace.json"
  expect "sweep with every output" 0 "Recommendation:" -- sweep "${args[@]}" || return
  cp "$out" "$tmp/sweep.out"
  check "sweep prints a Recommendation: line" grep -qE '^Recommendation: [0-9]+×[0-9]+' "$tmp/sweep.out"
  check "sweep wrote JSON, CSV, Markdown, HTML and trace" \
    test -s "$tmp/a.json" -a -s "$tmp/a.csv" -a -s "$tmp/a.md" -a -s "$tmp/a.html" -a -s "$tmp/a.trace.json"
  check "JSON has json_schema_version, 3 ok runs 1x4 2x2 4x1 and a recommendation" py '
d = load(sys.argv[1])
if "json_schema_version" not in d: fail("no json_schema_version")
runs = d["runs"]
splits = sorted((r["config"]["micro_batch"], r["config"]["accum_steps"]) for r in runs)
if splits != [(1, 4), (2, 2), (4, 1)]: fail("splits %s" % splits)
bad = [key(r) for r in runs if r["status"] != "ok" or r["peak_allocated_bytes"] <= 0]
if bad: fail("not ok or no peak: %s" % bad)
if (d["context"]["seq_len"], d["context"]["batch"]) != (32, 4): fail("context %s" % d["context"])
if not d.get("recommendation", {}).get("reason"): fail("no recommendation reason")
' "$tmp/a.json"
  check "CSV has a header and 3 lines of equal width" py '
lines = open(sys.argv[1], encoding="utf-8").read().splitlines()
if len(lines) != 4: fail("%d lines" % len(lines))
if not lines[0].startswith("label,micro_batch,accum_steps"): fail("header " + lines[0])
if len({l.count(",") for l in lines}) != 1: fail("lines of different widths")
if sorted(l.split(",")[0] for l in lines[1:]) != ["1×4", "2×2", "4×1"]: fail("labels")
' "$tmp/a.csv"
  check "Markdown has a table row per split and the recommendation" py '
text = open(sys.argv[1], encoding="utf-8").read()
rows = [l for l in text.splitlines() if l.startswith("| ") and "×" in l]
if len(rows) != 3: fail("%d split rows" % len(rows))
if "Recommendation" not in text: fail("no recommendation")
' "$tmp/a.md"
  check "HTML is a page naming every split" py '
text = open(sys.argv[1], encoding="utf-8").read()
if not text.lstrip().lower().startswith("<!doctype html"): fail("not an HTML document")
for s in ("1×4", "2×2", "4×1"):
    if s not in text: fail("no " + s)
' "$tmp/a.html"
  check "trace is Trace Event JSON with one process per split" py '
events = load(sys.argv[1])["traceEvents"]
names = sorted(e["args"]["name"] for e in events if e.get("name") == "process_name")
if names != ["1×4", "2×2", "4×1"]: fail("processes %s" % names)
if not any(e.get("ph") == "X" for e in events): fail("no complete events")
' "$tmp/a.trace.json"

  split_lines() { grep -E '^(split|[0-9]+×[0-9]+|Recommendation:)' "$1"; }
  if expect "report prints the table again" 0 "Recommendation:" -- report "$tmp/a.json"; then
    check "report's table and recommendation equal the sweep's" \
      diff <(split_lines "$tmp/sweep.out") <(split_lines "$out")
  fi
  if expect "report --markdown" 0 -- report "$tmp/a.json" --markdown "$tmp/report.md"; then
    check "report's Markdown equals the sweep's" diff "$tmp/a.md" "$tmp/report.md"
  fi
  if expect "compare a file with itself" 0 "1×4" "2×2" "4×1" -- compare "$tmp/a.json" "$tmp/a.json"; then
    check "compare shows ratio 1.00× for time and peak of every split" py '
rows = split_rows(sys.argv[1])
if len(rows) != 3: fail("%d split rows" % len(rows))
for l in rows:
    if l.split().count("1.00×") != 2: fail("row without two 1.00×: " + l)
' "$out"
  fi
  expect_user_error "compare: first file missing" "$tmp/none.json" -- compare "$tmp/none.json" "$tmp/a.json"
  expect_user_error "compare: second file missing" "$tmp/none.json" -- compare "$tmp/a.json" "$tmp/none.json"

  # A limit halfway between the smallest and the largest peak of the unlimited run. The largest
  # split is either measured out of memory ("oom", the counting allocator refused) or skipped
  # because the memory plan predicts it will not fit ("predicted-oom"); --try-predicted-oom,
  # which the predicted-oom message offers, must then measure it and find "oom".
  local limit
  limit=$(py '
peaks = sorted(r["peak_allocated_bytes"] for r in load(sys.argv[1])["runs"])
print((peaks[0] + peaks[-1]) // 2)
' "$tmp/a.json")
  local limit_check='
unlimited, limited, limit, want = load(sys.argv[1]), load(sys.argv[2]), int(sys.argv[3]), sys.argv[4].split(",")
peak = {key(r): r["peak_allocated_bytes"] for r in unlimited["runs"]}
status = {key(r): r["status"] for r in limited["runs"]}
small, large = min(peak, key=peak.get), max(peak, key=peak.get)
if status.get(small) != "ok": fail("smallest %s is %s" % (small, status.get(small)))
if status.get(large) not in want: fail("largest %s is %s, expected %s" % (large, status.get(large), " or ".join(want)))
for r in limited["runs"]:
    if r["status"] == "oom" and "memory limit" not in r["error"]: fail("oom without a reason: %r" % r["error"])
    if r["status"] == "predicted-oom" and not r["predicted_peak_bytes"] > limit:
        fail("%s predicted-oom with a predicted peak of %s" % (key(r), r["predicted_peak_bytes"]))
    if r["status"] == "ok" and r["peak_allocated_bytes"] > limit: fail("%s peaks over the limit" % key(r))
if limited["context"]["memory_limit_bytes"] != limit: fail("context memory_limit_bytes")
best = limited["runs"][limited["recommendation"]["best_index"]]
if best["status"] != "ok": fail("recommends %s, which is %s" % (key(best), best["status"]))
'
  tiny_args --memory-limit "$limit" --json "$tmp/limit.json"
  if expect "sweep under a memory limit of $limit bytes" 0 "memory limit" "Recommendation:" -- sweep "${args[@]}"; then
    check "the limited sweep still recommends a split" grep -qE '^Recommendation: [0-9]+×[0-9]+' "$out"
    check "under the limit the smallest split is ok, the largest oom or predicted-oom" \
      py "$limit_check" "$tmp/a.json" "$tmp/limit.json" "$limit" oom,predicted-oom
    if grep -q -- "--try-predicted-oom" "$tmp/limit.json"; then
      tiny_args --memory-limit "$limit" --try-predicted-oom --json "$tmp/limit-try.json"
      if expect "sweep --try-predicted-oom under the same limit" 0 "Recommendation:" -- sweep "${args[@]}"; then
        check "measured under the limit, the largest split runs out of memory" \
          py "$limit_check" "$tmp/a.json" "$tmp/limit-try.json" "$limit" oom
      fi
    fi
  fi

  cp "$tmp/a.json" "$tmp/other.json"
  tiny_args --model gpt2-mini --resume "$tmp/other.json"
  expect_user_error "resume a file measured with another model" "gpt2-tiny" "gpt2-mini" -- sweep "${args[@]}"
  check "a refused resume leaves the file alone" cmp "$tmp/a.json" "$tmp/other.json"
}
section "sweep: every output file, report, compare, --memory-limit, --resume of another model"
spawn sweep_and_reread

# ---------------------------------------------------------------------------------------------
sweep_knobs() {
  tiny_args --knobs --json "$tmp/knobs.json"
  expect "sweep --knobs" 0 "Recommendation:" -- sweep "${args[@]}" || return
  check "knobs checkpoint every split and put the optimizer in backward (alone and checkpointed) only at accumulation 1" py '
runs = load(sys.argv[1])["runs"]
if any(r["status"] != "ok" for r in runs): fail("a run failed")
keys = {key(r) for r in runs}
for s in ("1x4", "2x2", "4x1"):
    if s + " fp32 ckpt=blocks oib=False" not in keys: fail("no checkpointed " + s)
oib = [key(r) for r in runs if r["config"]["optimizer_in_backward"]]
if oib != ["4x1 fp32 ckpt=none oib=True", "4x1 fp32 ckpt=blocks oib=True"]: fail("optimizer-in-backward runs %s" % oib)
' "$tmp/knobs.json"
}
sweep_precisions() {
  tiny_args --micro-batches 4 --precision fp32,bf16
  expect "sweep over two precisions" 0 "Recommendation:" -- sweep "${args[@]}" || return
  check "each console row of a precision sweep names its precision" py '
rows = split_rows(sys.argv[1])
if len(rows) != 2: fail("%d rows" % len(rows))
for row, p in zip(rows, ("fp32", "bf16")):
    if p not in row: fail("row does not say %s: %s" % (p, row))
' "$out"
}
sweep_chunked() {
  tiny_args --chunked-loss --json "$tmp/chunked.json" --csv "$tmp/chunked.csv"
  expect "sweep --chunked-loss" 0 "4×1 chunked-ce" "Recommendation:" -- sweep "${args[@]}" || return
  check "--chunked-loss runs every split twice, planned within 10 %, and 4×1 (128 tokens, V=512) peaks lower chunked" py '
d = load(sys.argv[1])
runs = d["runs"]
if any(r["status"] != "ok" for r in runs): fail("a run failed")
keys = [key(r) for r in runs]
want = ["1x4 fp32 ckpt=none oib=False", "1x4 fp32 ckpt=none oib=False chunked", "2x2 fp32 ckpt=none oib=False",
        "2x2 fp32 ckpt=none oib=False chunked", "4x1 fp32 ckpt=none oib=False", "4x1 fp32 ckpt=none oib=False chunked"]
if keys != want: fail("runs %s" % keys)
if dict(d["context"]["options"]).get("chunked_loss") != "true": fail("context options do not say chunked_loss")
plain, chunked = runs[4], runs[5]
if chunked["peak_allocated_bytes"] >= plain["peak_allocated_bytes"]: fail("%s does not peak below the plain head" % key(chunked))
for chunked in runs[1::2]:
    error = abs(chunked["predicted_peak_bytes"] - chunked["peak_allocated_bytes"]) / chunked["peak_allocated_bytes"]
    if error > 0.10: fail("%s: plan %.1f %% off" % (key(chunked), 100 * error))
' "$tmp/chunked.json"
  check "the CSV has a chunked_loss column" py '
rows = list(csv.DictReader(open(sys.argv[1], encoding="utf-8")))
if [r["chunked_loss"] for r in rows] != ["false", "true"] * 3: fail("chunked_loss column %s" % [r["chunked_loss"] for r in rows])
' "$tmp/chunked.csv"
}
verify_chunked() {
  expect "verify --chunked-loss: variable lengths" 0 "PASS: every split" -- \
    verify --model gpt2-tiny --batch 4 --seq-len 32 --lengths variable --device cpu --threads 1 --chunked-loss || return
  check "verify --chunked-loss: the three splits again with the chunked loss, all passing" py '
rows = split_rows(sys.argv[1])
if len(rows) != 6 or not all(r.endswith("PASS") for r in rows): fail("rows %s" % rows)
if [r.split()[1] for r in rows[3:]] != ["chunked-ce"] * 3: fail("rows %s" % rows)
' "$out"
}
verify_small_chunks() {
  expect "verify --chunked-loss --loss-chunk-tokens 7: many chunks, the last one short" 0 "PASS: every split" -- \
    verify --model llama-tiny --batch 4 --seq-len 32 --lengths variable --device cpu --threads 1 --chunked-loss \
    --loss-chunk-tokens 7
}
plan_calibrated() {
  expect "plan --calibrate --knobs --chunked-loss" 0 "calibrated (probes" -- \
    plan --calibrate --knobs --chunked-loss --model gpt2-tiny --seq-len 32 --batch 2 --device cpu || return
  check "plan --calibrate: one line per split (2 micro-batches × knobs × loss heads), the columns aligned" py '
lines = [l for l in open(sys.argv[1], encoding="utf-8") if " analytic " in l]
if len(lines) != 12: fail("%d calibrated lines" % len(lines))
if len({l.index(" analytic ") for l in lines}) != 1: fail("analytic column not aligned:\n" + "".join(lines))
' "$out"
}
plan_chunked() {
  expect "plan --chunked-loss" 0 "one chunk's logits, fp32" "with the chunked loss:" -- \
    plan --model gpt2-124m --seq-len 1024 --batch 64 --precision bf16 --attention flash --memory 32GiB --chunked-loss || return
  check "plan --chunked-loss: every split plain and chunked; the chunked 64×1 fits 32 GiB, the plain does not" py '
rows = {" ".join(r.split()[:2]) if "chunked-ce" in r else r.split()[0]: r for r in split_rows(sys.argv[1])}
if len(rows) != 14: fail("%d split rows" % len(rows))
if not rows["64×1"].endswith("no") or not rows["64×1 chunked-ce"].endswith("yes"): fail("64×1 rows %s" % rows)
' "$out"
}
sweep_tokens() {
  tiny_args --micro-batches 4 --tokens "$tmp/good.u32" --token-bytes 4 --json "$tmp/tokens.json"
  expect "sweep on a 4-byte token file" 0 "Recommendation:" -- sweep "${args[@]}" || return
  check "the context names the token file" py '
opts = dict(load(sys.argv[1])["context"]["options"])
if opts.get("token_file") != sys.argv[2]: fail("token_file %r" % opts.get("token_file"))
' "$tmp/tokens.json" "$tmp/good.u32"
}
help_defaults() {
  expect "sweep --help" 0 "--memory-limit" "--knobs" "--resume" -- sweep --help || return
  local help_seq_len help_batch
  help_seq_len=$(grep -oE -- '--seq-len INT=[0-9]+' "$out" | grep -oE '[0-9]+$')
  help_batch=$(grep -oE -- '--batch INT=[0-9]+' "$out" | grep -oE '[0-9]+$')
  if [ -z "$help_seq_len" ] || [ -z "$help_batch" ]; then
    fail "help prints the defaults of --seq-len and --batch" "no \"--seq-len INT=N\" or \"--batch INT=N\""
    return
  fi
  # Leave --seq-len and --batch out: the run must use the defaults that the help printed.
  expect "sweep with the default seq-len and batch" 0 -- sweep --model gpt2-tiny --device cpu --threads 1 \
    --warmup 0 --steps 1 --micro-batches "$help_batch" --json "$tmp/defaults.json" || return
  check "help's defaults (--seq-len $help_seq_len, --batch $help_batch) are what sweep uses" py '
c = load(sys.argv[1])["context"]
if (c["seq_len"], c["batch"]) != (int(sys.argv[2]), int(sys.argv[3])):
    fail("sweep used seq_len %s batch %s" % (c["seq_len"], c["batch"]))
' "$tmp/defaults.json" "$help_seq_len" "$help_batch"
}
verify_token() {
  expect "verify: token normalization, variable lengths" 0 "PASS" -- \
    verify --model gpt2-tiny --batch 4 --seq-len 32 --lengths variable --device cpu --threads 1 || return
  check "verify: every split passes" py '
rows = split_rows(sys.argv[1])
if len(rows) != 3 or not all(r.endswith("PASS") for r in rows): fail("rows %s" % rows)
' "$out"
}
verify_mean_of_means() {
  expect "verify: mean-of-means fails" 1 "FAIL" -- \
    verify --model gpt2-tiny --batch 8 --seq-len 32 --lengths variable --loss-normalization mean-of-means \
    --device cpu --threads 1
}
verify_optimizer_in_backward() {
  expect "verify --optimizer-in-backward" 0 "PASS" -- \
    verify --model gpt2-tiny --batch 4 --seq-len 32 --device cpu --threads 1 --optimizer-in-backward || return
  check "verify: the optimizer-in-backward row passes" grep -qE '^[0-9]+×[0-9]+ oib .*PASS$' "$out"
}
# ---- data parallel: torchrun's variables, ranks as processes on 127.0.0.1 (Gloo) ----
dp_port=$((20000 + $$ % 20000))
# dp_run RANKS PORT ARGS...: accumbench ARGS as RANKS processes; rank 0's output in $out/$err
# and its status in $rc, the other ranks' output in $out.rank<r>, their worst status in $dp_rc.
dp_run() {
  local ranks=$1 port=$2 r pid
  shift 2
  last_command="WORLD_SIZE=$ranks MASTER_PORT=$port accumbench $*"
  local pids=()
  for ((r = 1; r < ranks; r++)); do
    WORLD_SIZE=$ranks RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      timeout "$run_limit_s" "$bin" "$@" >"$out.rank$r" 2>&1 &
    pids+=("$!")
  done
  WORLD_SIZE=$ranks RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout "$run_limit_s" "$bin" "$@" >"$out" 2>"$err"
  rc=$?
  dp_rc=0
  for pid in "${pids[@]}"; do wait "$pid" || dp_rc=$?; done
}
dp_verify() {
  dp_run 2 "$dp_port" verify --model gpt2-tiny --batch 8 --seq-len 32 --lengths variable --device cpu --threads 1
  if [ "$rc" -ne 0 ] || [ "$dp_rc" -ne 0 ]; then
    fail "data parallel verify (2 ranks)" "exit status rank 0: $rc, rank 1: $dp_rc"
    return
  fi
  pass "data parallel verify (2 ranks)"
  check "data parallel verify: header names 2 ranks, every split passes" py '
text = open(sys.argv[1], encoding="utf-8").read()
if "data parallel over 2 ranks" not in text: fail("no world size in the header")
rows = split_rows(sys.argv[1])
if len(rows) != 3 or not all(r.endswith("PASS") for r in rows): fail("rows %s" % rows)
' "$out"
  check "data parallel verify: rank 1 prints nothing" test ! -s "$out.rank1"
}
dp_sweep() {
  tiny_args --batch 8 --json "$tmp/dp.json"
  dp_run 2 "$((dp_port + 1))" sweep "${args[@]}"
  if [ "$rc" -ne 0 ] || [ "$dp_rc" -ne 0 ]; then
    fail "data parallel sweep (2 ranks)" "exit status rank 0: $rc, rank 1: $dp_rc"
    return
  fi
  pass "data parallel sweep (2 ranks)"
  check "data parallel sweep: JSON has world size 2, gloo, an allreduce phase, all ranks' tokens, plan within 5 %" py '
r = load(sys.argv[1])
c = r["context"]
if (c["world_size"], c["distributed_backend"]) != (2, "gloo"): fail("context %s %s" % (c["world_size"], c["distributed_backend"]))
splits = sorted((x["config"]["micro_batch"], x["config"]["accum_steps"]) for x in r["runs"])
if splits != [(1, 4), (2, 2), (4, 1)]: fail("splits %s (4 sequences per rank)" % splits)
for x in r["runs"]:
    if x["config"]["world_size"] != 2: fail("run world size %s" % x["config"]["world_size"])
    if not x["phase_median_seconds"]["allreduce"] > 0: fail("no allreduce time in %s" % key(x))
    if x["tokens_per_step"] != 8 * 32: fail("tokens per step %s, expected 256 (both ranks)" % x["tokens_per_step"])
    error = abs(x["predicted_peak_bytes"] - x["peak_allocated_bytes"]) / x["peak_allocated_bytes"]
    if error > 0.05: fail("%s: plan %s vs measured %s bytes (bucket copies included), %.1f %% off" % (
        key(x), x["predicted_peak_bytes"], x["peak_allocated_bytes"], 100 * error))
' "$tmp/dp.json"
  check "data parallel sweep: console shows the allreduce column" grep -q "allreduce ms" "$out"
  check "data parallel sweep: rank 1 prints nothing" test ! -s "$out.rank1"
}
dp_user_errors() {
  export MASTER_ADDR=127.0.0.1 MASTER_PORT=$((dp_port + 2)) WORLD_SIZE=2
  tiny_args --batch 8
  expect_user_error "WORLD_SIZE=2 without RANK" "RANK" "torchrun" -- sweep "${args[@]}"
  export RANK=2
  expect_user_error "RANK outside the world" "RANK=2" "WORLD_SIZE=2" -- sweep "${args[@]}"
  export RANK=0
  tiny_args --batch 5
  expect_user_error "batch not divisible by WORLD_SIZE" "--batch 5" "WORLD_SIZE=2" -- sweep "${args[@]}"
  tiny_args --batch 8 --micro-batches 3
  expect_user_error "micro-batch not dividing a rank's share" "micro-batch 3" "4 sequences per rank" -- sweep "${args[@]}"
  tiny_args --batch 8 --time-budget 1
  expect_user_error "--time-budget with data parallel" "--time-budget" "--steps" -- sweep "${args[@]}"
  expect_user_error "verify --optimizer-in-backward with data parallel" "--optimizer-in-backward" "data parallel" \
    -- verify --model gpt2-tiny --batch 8 --seq-len 32 --device cpu --threads 1 --optimizer-in-backward
}
section "data parallel (c10d, Gloo, 2 processes)"
spawn expect_user_error "plan --world-size not dividing the batch" "--world-size 3" "--batch 64" -- plan --world-size 3
spawn expect "plan --world-size 8 plans one rank's share" 0 "over 8 data-parallel ranks, 8 per rank" -- \
  plan --model gpt2-124m --seq-len 1024 --batch 64 --world-size 8 --precision bf16 --memory 80GiB
spawn dp_verify
spawn dp_sweep
spawn dp_user_errors

section "sweep variants, help, verify"
spawn sweep_knobs
spawn sweep_precisions
spawn sweep_tokens
spawn sweep_chunked
tiny_args --loss-chunk-tokens 8
spawn expect_user_error "--loss-chunk-tokens without --chunked-loss" "--loss-chunk-tokens" "--chunked-loss" -- sweep "${args[@]}"
spawn expect_user_error "negative --loss-chunk-tokens" "--loss-chunk-tokens" "-8" -- \
  verify --model gpt2-tiny --device cpu --chunked-loss --loss-chunk-tokens -8
if ! command -v nvidia-smi >/dev/null 2>&1; then  # planning for a GPU that is not attached
  spawn expect "plan --device cuda without a GPU plans for PyTorch 2.x on CUDA" 0 "not attached here" \
    "attention flash" "8×8" -- plan --device cuda --model gpt2-124m --precision bf16 --memory 80GiB
  spawn expect_user_error "plan --device cuda --calibrate without a GPU" "--calibrate" "not attached" -- \
    plan --device cuda --calibrate --model gpt2-tiny --seq-len 64 --batch 4
fi
spawn verify_chunked
spawn verify_small_chunks
spawn plan_chunked
spawn plan_calibrated
tiny_args --seq-len "$tiny_max_t" --batch 1 --warmup 0 --steps 1
spawn expect "sweep at exactly the model's $tiny_max_t positions" 0 "Recommendation:" -- sweep "${args[@]}"
spawn help_defaults
spawn expect "--help-all lists every subcommand" 0 "sweep" "verify" "report" "compare" "models" -- --help-all
spawn verify_token
spawn verify_mean_of_means
spawn verify_optimizer_in_backward

collect
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
