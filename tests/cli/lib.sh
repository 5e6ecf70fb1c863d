# Shared helpers of the CLI tests (tests/cli/*.sh source this file; ctest registers one case per
# table row or per script mode, see tests/cli/CMakeLists.txt).
#
#   source "$(dirname "$0")/lib.sh"
#   cli_init "$@"                     # BINARY DATA_DIR CLI_DIR CASE: sets $bin, $data, $work, ...
#   tiny_args --batch 6; expect_user_error "batch 6" -- sweep "${args[@]}"
#   cli_pass
#
# A case stops at its first failed check: `fail` prints "FAIL <case>: <reason>", the command and
# the first lines of its output, and exits 1. Each case runs in its own scratch directory
# $work = CLI_DIR/work/CASE, made empty at the start, removed when the case passes and kept (for
# a look) when it fails. Fixture outputs that several cases read live in CLI_DIR/fixtures.
#
# Every run uses the tiny model on one CPU thread: with every hardware thread (the default), other
# processes on a busy two-core machine make LibTorch's thread pool about 50x slower.
# shellcheck disable=SC2034  # the variables set here are used by the scripts that source this file
set -uo pipefail

# A run that hangs must not hang ctest; the longest run here takes a few seconds. ctest's own
# TIMEOUT (tests/cli/CMakeLists.txt) is above this, so a hung command is reported with its name.
run_limit_s=120

# cli_init BINARY DATA_DIR CLI_DIR CASE [MORE...]: checks the arguments, makes the scratch
# directory; MORE is left in the array `case_args`.
cli_init() {
  if [ $# -lt 4 ]; then
    echo "usage: $0 ACCUMBENCH_BINARY TESTS_DATA_DIR CLI_DIR CASE_NAME [ARGS...]" >&2
    exit 2
  fi
  bin=$1
  data=$2
  cli_dir=$3
  case_name=$4
  shift 4
  case_args=("$@")
  if [ ! -x "$bin" ]; then
    echo "$case_name: $bin is not an executable; build accumbench first" >&2
    exit 2
  fi
  if [ ! -d "$data/hf" ]; then
    echo "$case_name: $data/hf does not exist; pass the tests/data directory" >&2
    exit 2
  fi
  if ! command -v python3 >/dev/null 2>&1; then
    echo "$case_name: python3 is needed to read the JSON results" >&2
    exit 2
  fi
  mkdir -p "$cli_dir" && cli_dir=$(cd "$cli_dir" && pwd) || exit 2
  inputs=$cli_dir/fixtures/inputs   # token files and broken result files (make_inputs.py)
  sweep_dir=$cli_dir/fixtures/sweep # one sweep's outputs in every format (sweep_outputs.sh write)
  work=$cli_dir/work/$case_name
  rm -rf "$work" && mkdir -p "$work" || exit 2
  out=$work/out      # stdout of the last command
  err=$work/err      # stderr of the last command
  rc=0               # exit status of the last command
  last_command=""    # shown when a check fails; empty for checks that are not a command's output
  command_prefix=""  # shown before the command: the environment a case exported for it
  background_pids=()
  # A launch environment from the caller's shell would turn every run into a data-parallel rank.
  unset WORLD_SIZE RANK LOCAL_RANK MASTER_ADDR MASTER_PORT
  trap cli_cleanup EXIT
}

cli_cleanup() {
  local status=$? pid
  for pid in "${background_pids[@]}"; do kill -9 "$pid" 2>/dev/null; done
  if [ "$status" -eq 0 ]; then
    rm -rf "$work"
  elif [ -d "$work" ]; then
    echo "     (scratch directory kept: $work)"
  fi
}

cli_pass() {
  echo "ok   $case_name"
  if [ -n "$last_command" ]; then echo "     last command: $last_command"; fi
  exit 0
}

# skip REASON: ctest counts exit 77 as skipped (SKIP_RETURN_CODE).
skip() {
  echo "skip $case_name: $1"
  exit 77
}

# fail REASON: the last command and its output explain the failure.
fail() {
  echo "FAIL $case_name: $1"
  if [ -n "$last_command" ]; then
    echo "     command: $last_command"
    if [ -s "$out" ]; then sed -n '1,30s/^/     stdout: /p' "$out"; fi
    if [ -s "$err" ]; then sed -n '1,30s/^/     stderr: /p' "$err"; fi
  fi
  exit 1
}

# run ARGS...: runs accumbench with ARGS, capturing stdout, stderr and the exit status.
run() {
  last_command="${command_prefix}accumbench $*"
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
    # grep reads the files itself: `cat | grep -q` fails under pipefail when grep stops at an early
    # match and cat, still writing the next file, dies of SIGPIPE.
    if ! grep -qF -- "$p" "${files[@]}"; then
      printf '%s' "$p"
      return 0
    fi
  done
  return 1
}

# expect RC PATTERN... -- ARGS...: accumbench ARGS exits with RC and its stdout or stderr contains
# every PATTERN (fixed strings).
expect() {
  local want_rc=$1
  shift
  local patterns=()
  while [ "$1" != "--" ]; do patterns+=("$1"); shift; done
  shift
  run "$@"
  if [ "$rc" -ne "$want_rc" ]; then
    fail "exit status $rc, expected $want_rc"
  fi
  local missing
  if missing=$(missing_patterns "$out" "$err" -- "${patterns[@]}"); then
    fail "output lacks \"$missing\""
  fi
}

# expect_user_error PATTERN... -- ARGS...: accumbench ARGS is a user mistake: exit 2, nothing on
# stdout, exactly one stderr line "accumbench: error: ..." containing every PATTERN, and no sign
# of an uncaught C++ exception.
expect_user_error() {
  local patterns=()
  while [ "$1" != "--" ]; do patterns+=("$1"); shift; done
  shift
  run "$@"
  if [ "$rc" -ne 2 ]; then
    fail "exit status $rc, expected 2 (a user error)"
  fi
  local lines
  lines=$(wc -l <"$err")
  if [ "$lines" -ne 1 ]; then
    fail "stderr has $lines lines, expected one sentence"
  fi
  if ! grep -q '^accumbench: error: ' "$err"; then
    fail "stderr does not start with \"accumbench: error: \""
  fi
  if grep -qE 'terminate called|what\(\)|Exception raised from|frame #|c10::Error|\.cpp:[0-9]+' "$err"; then
    fail "stderr shows a C++ exception or source location instead of a plain sentence"
  fi
  if [ -s "$out" ]; then
    fail "a user error printed to stdout"
  fi
  local missing
  if missing=$(missing_patterns "$err" -- "${patterns[@]}"); then
    fail "the message lacks \"$missing\""
  fi
}

# check DESCRIPTION COMMAND...: a check made by a shell command or `py`; what it prints is the
# reason when it fails.
check() {
  local description=$1
  shift
  local why
  if ! why=$("$@" 2>&1); then
    fail "$description: ${why:-\"$*\" failed}"
  fi
}

# py CODE ARGS...: runs a python3 snippet with ARGS as sys.argv[1:]; fail(reason) exits 1.
py() {
  local code=$1
  shift
  python3 - "$@" <<PYEOF
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
PYEOF
}

# tiny_args [OPTION VALUE | FLAG]...: sets the array `args` to the tiny sweep (gpt2-tiny, T=32,
# batch 4, one warmup and two timed steps, one CPU thread), with each given OPTION replacing its
# default (the CLI rejects an option given twice) and any other argument appended.
tiny_args() {
  _tiny_with --model gpt2-tiny --seq-len 32 --batch 4 --warmup 1 --steps 2 --time-budget 0 --device cpu --threads 1 -- "$@"
}
# tiny_verify_args ...: the same for verify, which takes the model and shape options of the tiny
# sweep but no --warmup or --steps.
tiny_verify_args() {
  _tiny_with --model gpt2-tiny --seq-len 32 --batch 4 --device cpu --threads 1 -- "$@"
}
_tiny_with() {
  local -A value=()
  local order=()
  while [ "$1" != "--" ]; do value[$1]=$2; order+=("$1"); shift 2; done
  shift
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

# timed_runs_in FILE: the number of runs with timed steps in a sweep's JSON (saved after each
# split's warm-up, before the rounds time it, and in the rounds); 0 while it is absent or not yet
# valid JSON. The cases that stop a sweep mid-rounds poll it.
timed_runs_in() {
  python3 -c 'import json, sys; print(sum(1 for r in json.load(open(sys.argv[1]))["runs"] if r["steps"]))' "$1" \
    2>/dev/null || echo 0
}

# free_port: a TCP port on 127.0.0.1 that nothing listens on now (for MASTER_PORT: the data
# parallel cases run in parallel with each other).
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# has_gpu: true where nvidia-smi lists a GPU (the cases about a missing GPU are skipped there).
has_gpu() {
  command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q GPU
}
