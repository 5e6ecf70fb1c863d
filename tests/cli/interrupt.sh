#!/usr/bin/env bash
# A sweep stopped by a signal reports what it measured (include/accumbench/interrupt.hpp): it ends
# the round in progress, writes every output file, prints its table and exits 128 + the signal;
# --resume then finishes it. The signal is sent once the JSON holds timed steps (saved every 5 s in
# the rounds), so the rounds are under way and each split is short of its 200 --steps. (A stop
# during the warm-ups is Sweep.AStopDuringTheWarmUpsReportsWhatWasMeasured.)
#
#   tests/cli/interrupt.sh BINARY DATA_DIR CLI_DIR CASE single|data_parallel|verify|ignored
# shellcheck disable=SC2317  # the mode functions are called as "$mode"
source "$(dirname "$0")/lib.sh"
cli_init "$@"

json=$work/stopped.json
# wait_for_json PID...: until the JSON holds timed runs, or a process ended, or the deadline passed.
wait_for_json() {
  local deadline=$((SECONDS + run_limit_s)) pid
  while [ "$SECONDS" -lt "$deadline" ]; do
    for pid in "$@"; do kill -0 "$pid" 2>/dev/null || return 1; done
    [ "$(timed_runs_in "$json")" -ge 1 ] && return 0
    sleep 0.1
  done
  return 1
}
# start_interruptible COMMAND ARGS...: accumbench COMMAND ARGS in the background, its output in
# $out and $err, its process id in $pid. A background job of a script ignores SIGINT (bash without
# job control), and accumbench keeps an ignored signal ignored: set -m launches it as a terminal would.
start_interruptible() {
  last_command="accumbench $* (in the background, then SIGINT)"
  set -m
  (exec "$bin" "$@" >"$out" 2>"$err") &
  pid=$!
  set +m
  background_pids+=("$pid")
}
# stop_with_sigint: Ctrl-C to $pid; its exit status in $rc.
stop_with_sigint() {
  kill -INT "$pid"
  wait "$pid"
  rc=$?
}
check_stopped_json() {  # check_stopped_json SIGNAL SPLITS
  check "the stopped sweep's JSON names $1, holds its $2 splits short of their 200 rounds, all alike" py '
d = load(sys.argv[1])
if d["interruption"]["signal"] != sys.argv[2]: fail("interruption %s" % d["interruption"])
if d["interruption"]["splits_not_run"]: fail("splits not run %s" % d["interruption"]["splits_not_run"])
steps = sorted(set(len(r["steps"]) for r in d["runs"]))
if len(d["runs"]) != int(sys.argv[3]) or len(steps) != 1 or not 0 < steps[0] < 200: fail("timed steps %s" % steps)
if not d["recommendation"]["reason"].startswith("Interrupted by " + sys.argv[2]): fail(d["recommendation"]["reason"])
' "$json" "$1" "$2"
}

# cli.sweep.interrupt: Ctrl-C as SIGINT to the one process.
single() {
  tiny_args --batch 8 --steps 200 --json "$json" --csv "$work/stopped.csv" --markdown "$work/stopped.md"
  start_interruptible sweep "${args[@]}"
  wait_for_json "$pid" || fail "the sweep ended or hung before its JSON held a run"
  stop_with_sigint
  [ "$rc" -eq 130 ] || fail "exit status $rc after SIGINT, expected 130 (128 + SIGINT)"
  check "stdout has the table and the interruption first in the recommendation" \
    grep -q '^Recommendation: .*Interrupted by SIGINT: the timed rounds stopped after' "$out"
  check "the recommendation names the file to resume" grep -q "the same command with --resume $json measures what is missing" "$out"
  check "stderr says it stops, and the files written" py '
text = open(sys.argv[1]).read()
for want in ("stopping after the split or round in progress", "wrote " + sys.argv[2], "wrote " + sys.argv[3]):
    if want not in text: fail("no %r in stderr" % want)
' "$err" "$work/stopped.csv" "$work/stopped.md"
  check "the CSV holds the 4 splits" test "$(wc -l <"$work/stopped.csv")" -eq 5
  check_stopped_json SIGINT 4

  cp "$json" "$work/stopped-before-resume.json"
  tiny_args --batch 8 --steps 200 --resume "$json"
  expect 0 "8×1" "Recommendation:" -- sweep "${args[@]}"
  check "resume measured every split again for its 200 rounds beside the file's steps, and the file says it ran to its end" py '
d = load(sys.argv[1])
before = {key(r): len(r["steps"]) for r in load(sys.argv[2])["runs"]}
if d["interruption"] != {"signal": "", "splits_not_run": [], "saved_while_running": False, "error": ""}: fail("interruption %s" % d["interruption"])
for r in d["runs"]:
    own = sum(1 for s in r["steps"] if s["session"] == r["session"])
    if own != 200 or len(r["steps"]) != 200 + before[key(r)]: fail("%s: %d steps, %d this sweep'"'"'s" % (key(r), len(r["steps"]), own))
' "$json" "$work/stopped-before-resume.json"
}

# cli.data_parallel.interrupt: SIGTERM to rank 1 alone (as a scheduler might); both ranks stop after
# the same round, rank 0 writes the files, and neither hangs waiting for the other.
data_parallel() {
  local port
  port=$(free_port) || fail "no free port"
  tiny_args --batch 8 --steps 200 --json "$json"
  last_command="WORLD_SIZE=2 MASTER_PORT=$port accumbench sweep ${args[*]} (SIGTERM to rank 1)"
  local pids=() r
  for r in 0 1; do
    env RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
      timeout "$run_limit_s" "$bin" sweep "${args[@]}" >"$out.rank$r" 2>&1 &
    pids+=("$!")
    background_pids+=("$!")
  done
  wait_for_json "${pids[@]}" || fail "a rank ended or hung before rank 0's JSON held a run"
  # timeout runs accumbench as its child: signal the child, not timeout.
  local rank1
  rank1=$(pgrep -P "${pids[1]}") || fail "no accumbench under rank 1's timeout"
  kill -TERM "$rank1"
  local rc0=0 rc1=0
  wait "${pids[0]}" || rc0=$?
  wait "${pids[1]}" || rc1=$?
  cp "$out.rank0" "$out"
  [ "$rc1" -eq 143 ] || fail "rank 1 exit status $rc1 after SIGTERM, expected 143 (128 + SIGTERM)"
  [ "$rc0" -eq 143 ] || fail "rank 0 exit status $rc0 after rank 1's SIGTERM, expected 143"
  check "rank 0 printed the interruption" grep -q "Interrupted by another rank's signal" "$out"
  check_stopped_json "another rank's signal" 3  # 4 sequences per rank
}

# cli.verify.interrupt: Ctrl-C during verify's splits. --export writes the reference step (index.json
# last) before the first split, so the signal lands in the splits: the ones not verified are named,
# and the exit status is 130. gpt2-mini at T=128, batch 32: six splits of about a second each here.
verify() {
  local export_dir=$work/reference
  tiny_verify_args --model gpt2-mini --seq-len 128 --batch 32 --export "$export_dir"
  start_interruptible verify "${args[@]}"
  local deadline=$((SECONDS + run_limit_s))
  until python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$export_dir/index.json" 2>/dev/null; do
    kill -0 "$pid" 2>/dev/null || fail "verify ended before it exported the reference step"
    [ "$SECONDS" -lt "$deadline" ] || fail "no $export_dir/index.json after $run_limit_s s"
    sleep 0.05
  done
  stop_with_sigint
  [ "$rc" -eq 130 ] || fail "exit status $rc after SIGINT, expected 130 (128 + SIGINT)"
  check "stderr says verify stops after its split (it has no rounds)" \
    grep -q '^accumbench: stopping after the split in progress, then reporting what was measured' "$err"
  check "verify names the splits it did not verify, and no PASS for the whole" py '
import re
text = open(sys.argv[1], encoding="utf-8").read()
m = re.search(r"^Interrupted by SIGINT: (\d+) splits? not verified \((.*)\); run verify again to check (?:it|them)$", text, re.M)
if not m: fail("no interruption line")
if int(m.group(1)) < 1 or "32\u00d71" not in m.group(2): fail("not verified: %s" % m.group(2))
if "PASS: every split" in text: fail("a PASS for the whole check")
rows = split_rows(sys.argv[1])
if len(rows) + int(m.group(1)) != 6: fail("%d rows + %s not verified != 6 splits" % (len(rows), m.group(1)))
' "$out"
}

# cli.sweep.interrupt_ignored: a background job of a script (bash without job control) inherits
# SIGINT ignored, as a terminal's Ctrl-C is not meant for it; accumbench keeps it ignored and the
# sweep runs to its end. Long enough (400 rounds, about 15 s here) that a save during the rounds
# (every 5 s) holds runs before the end: with 60 rounds the sweep could end within 5 s, its only
# save with steps the last, and the signal come too late to be tested (seen once in CI).
ignored() {
  tiny_args --batch 8 --steps 400 --json "$json"
  last_command="accumbench sweep ${args[*]} (in the background without job control, then SIGINT)"
  "$bin" sweep "${args[@]}" >"$out" 2>"$err" &
  pid=$!
  background_pids+=("$pid")
  wait_for_json "$pid" || fail "the sweep ended or hung before its JSON held a run"
  stop_with_sigint
  [ "$rc" -eq 0 ] || fail "exit status $rc after an ignored SIGINT, expected 0 (the sweep runs to its end)"
  check "the sweep ran to its end" py '
d = load(sys.argv[1])
if d["interruption"]["signal"]: fail("interruption %s" % d["interruption"])
if sorted(len(r["steps"]) for r in d["runs"]) != [400] * 4: fail("steps %s" % [len(r["steps"]) for r in d["runs"]])
' "$json"
}

# cli.sweep.output_lost: an output that can no longer be written while the sweep runs (its directory
# removed once the JSON holds timed steps) stops neither the sweep nor the other files: the table is
# printed, the JSON written, the lost file named in an error line, and the exit status is 2.
output_lost() {
  mkdir -p "$work/gone"
  # Rounds that outlast the first save with timed steps (after 5 s): with 60 the whole sweep could
  # end before it, and the CSV was written before its directory went.
  tiny_args --batch 8 --steps 300 --json "$json" --csv "$work/gone/run.csv"
  last_command="accumbench sweep ${args[*]} (its --csv directory removed while it runs)"
  (exec "$bin" sweep "${args[@]}" >"$out" 2>"$err") &
  pid=$!
  background_pids+=("$pid")
  wait_for_json "$pid" || fail "the sweep ended or hung before its JSON held a run"
  rm -rf "$work/gone"
  wait "$pid"
  rc=$?
  [ "$rc" -eq 2 ] || fail "exit status $rc, expected 2 (an output not written)"
  check "the table and the recommendation are printed" grep -q '^Recommendation: ' "$out"
  check "stderr names the JSON written and the CSV not" py '
text = open(sys.argv[1]).read()
if "accumbench: wrote " + sys.argv[2] not in text: fail("no wrote line for the JSON: %r" % text[-600:])
import re
if not re.search(re.escape("accumbench: error: cannot write " + sys.argv[3] + " (writing " + sys.argv[3] + ".") + r"[0-9]+-[0-9]+\.tmp: No such file or directory\)", text): fail(text[-600:])
if "wrote " + sys.argv[3] in text: fail("claims the CSV was written")
' "$err" "$json" "$work/gone/run.csv"
  check "the JSON holds the whole sweep" py '
d = load(sys.argv[1])
if d["interruption"]["saved_while_running"] or sorted(len(r["steps"]) for r in d["runs"]) != [300] * 4: fail("%s" % d["interruption"])
' "$json"
}

# cli.sweep.interrupt_before_measuring: a signal before anything is measured ends the process at
# once, as without the handler: here a sweep blocked reading a token file from a pipe no one writes,
# which a stop asked for would never reach (it said "stopping after ..." and hung until a second one).
before_measuring() {
  local fifo=$work/no_writer
  rm -f "$fifo"
  mkfifo "$fifo"
  tiny_args --tokens "$fifo" --json "$work/never.json"
  start_interruptible sweep "${args[@]}"
  sleep 1
  kill -0 "$pid" 2>/dev/null || fail "the sweep ended before the signal (it should wait on the pipe)"
  local start=$SECONDS
  stop_with_sigint
  [ "$rc" -eq 130 ] || fail "exit status $rc after SIGINT, expected 130 (128 + SIGINT)"
  [ $((SECONDS - start)) -le 5 ] || fail "the sweep took $((SECONDS - start)) s to end after SIGINT"
  check "nothing promises a report of what was measured" bash -c '! grep -q "stopping after" "$1"' _ "$err"
  check "no results file, as nothing was measured" test ! -e "$work/never.json"
}

# cli.sweep.interrupt_echo: one request that arrives twice (GNU `timeout -s INT` signals its command
# and then its process group) stops the sweep as one signal does, its table printed and its files
# written (it quit at once, losing the rounds, before).
echo_signal() {
  tiny_args --batch 8 --steps 200 --json "$json"
  start_interruptible sweep "${args[@]}"
  wait_for_json "$pid" || fail "the sweep ended or hung before its JSON held a run"
  kill -INT "$pid"
  sleep 0.02
  stop_with_sigint
  [ "$rc" -eq 130 ] || fail "exit status $rc after SIGINT twice at once, expected 130 (128 + SIGINT)"
  check "a signal echoed 20 ms later still reports what was measured" \
    grep -q '^Recommendation: .*Interrupted by SIGINT: the timed rounds stopped after' "$out"
  check_stopped_json SIGINT 4
}

mode=${case_args[0]:-}
case "$mode" in
  single | data_parallel | verify | ignored | output_lost | before_measuring | echo_signal) "$mode" ;;
  *) fail "unknown mode '$mode'" ;;
esac
cli_pass
