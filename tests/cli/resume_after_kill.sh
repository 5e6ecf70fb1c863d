#!/usr/bin/env bash
# cli.resume.after_kill: a sweep killed with -9 leaves valid JSON that --resume finishes. The
# splits are timed in interleaved rounds and the file is saved every 5 s: 4 splits × 200 rounds
# take well over that, and the sweep is killed as soon as its JSON holds timed steps, so every
# split in it has fewer than --steps timed steps and --resume measures them again. (Keeping splits a file
# holds complete is Sweep.ResumeKeepsFinishedSplits.) The JSON file is polled with a deadline.
#
#   tests/cli/resume_after_kill.sh BINARY DATA_DIR CLI_DIR CASE
source "$(dirname "$0")/lib.sh"
cli_init "$@"

json=$work/resume.json

tiny_args --batch 8 --steps 200 --json "$json"
# exec: $! is accumbench itself, so kill -9 hits the sweep and not a shell around it.
(exec "$bin" sweep "${args[@]}" >"$work/killed.out" 2>&1) &
pid=$!
background_pids+=("$pid")
finished=0
deadline=$((SECONDS + run_limit_s))
while [ "$SECONDS" -lt "$deadline" ] && kill -0 "$pid" 2>/dev/null; do
  finished=$(timed_runs_in "$json")
  if [ "$finished" -ge 1 ]; then break; fi
  sleep 0.1
done
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
finished=$(timed_runs_in "$json")
if [ "$finished" -ne 4 ]; then
  last_command="accumbench sweep ${args[*]} (in the background, killed with -9)"
  cp "$work/killed.out" "$out"
  : >"$err"
  fail "its JSON held $finished runs when it was killed, expected the 4 splits"
fi
check "the killed sweep's JSON is valid and holds every split, each short of its 200 rounds" py '
d = load(sys.argv[1])
if any(r["status"] != "ok" for r in d["runs"]): fail("runs %s" % d["runs"])
steps = [len(r["steps"]) for r in d["runs"]]
if not all(0 < n < 200 for n in steps): fail("timed steps %s" % steps)
stop = d["interruption"]
if not stop["saved_while_running"] or stop["signal"] or stop["error"]: fail("interruption %s" % stop)
' "$json"
cp "$json" "$work/killed.json"
expect 0 "Recommendation: " "Saved while the sweep ran; a file left like this is from a sweep that did not reach its end" \
  -- report "$work/killed.json"

# A resume stopped early (SIGINT a second in, while it measures the splits again from zero) never
# leaves the file with fewer timed steps of a split than it held, nor fewer splits.
tiny_args --batch 8 --steps 200 --resume "$json"
last_command="timeout -s INT 1 accumbench sweep ${args[*]}"
timeout -s INT 1 "$bin" sweep "${args[@]}" >"$work/stopped.out" 2>&1
check "a resume stopped early keeps every split with at least the timed steps the file held" py '
before = {key(r): len(r["steps"]) for r in load(sys.argv[1])["runs"]}
after = {key(r): len(r["steps"]) for r in load(sys.argv[2])["runs"]}
if sorted(after) != sorted(before): fail("splits %s, the file held %s" % (sorted(after), sorted(before)))
fewer = {k: (after[k], before[k]) for k in before if after[k] < before[k]}
if fewer: fail("timed steps (after, before) %s" % fewer)
' "$work/killed.json" "$json"

expect 0 "8×1" "Recommendation:" -- sweep "${args[@]}"
check "resume measured the unfinished splits again, each for its 200 rounds beside the file's steps" py '
after = load(sys.argv[1])
before = {key(r): len(r["steps"]) for r in load(sys.argv[2])["runs"]}
keys = sorted(key(r) for r in after["runs"])
if keys != ["%s fp32 ckpt=none oib=False" % s for s in ("1x8", "2x4", "4x2", "8x1")]:
    fail("runs after resume %s" % keys)
for r in after["runs"]:
    own = sum(1 for s in r["steps"] if s["session"] == r["session"])
    if r["status"] != "ok" or own != 200 or len(r["steps"]) < 200 + before[key(r)]:
        fail("%s: %d steps, %d of them this sweep'"'"'s; the killed file held %d" % (key(r), len(r["steps"]), own, before[key(r)]))
if not after["interruption"] == {"signal": "", "splits_not_run": [], "saved_while_running": False, "error": ""}:
    fail("the finished file is not whole: %s" % after["interruption"])
' "$json" "$work/killed.json"
cli_pass
