#!/usr/bin/env bash
# cli.resume.after_kill: a sweep killed with -9 leaves valid JSON that --resume finishes without
# measuring the same split twice. 4 splits × 31 steps take several seconds; the sweep is killed
# as soon as the first split is in its JSON, then finished with --resume (without --json: the
# help says resume keeps writing the file). Nothing else here depends on timing; the JSON file is
# polled with a deadline.
#
#   tests/cli/resume_after_kill.sh BINARY DATA_DIR CLI_DIR CASE
source "$(dirname "$0")/lib.sh"
cli_init "$@"

json=$work/resume.json
runs_in() {  # the number of runs in a result file; 0 while it is absent or not yet valid JSON
  python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["runs"]))' "$1" 2>/dev/null || echo 0
}

tiny_args --batch 8 --steps 30 --json "$json"
# exec: $! is accumbench itself, so kill -9 hits the sweep and not a shell around it.
(exec "$bin" sweep "${args[@]}" >"$work/killed.out" 2>&1) &
pid=$!
background_pids+=("$pid")
finished=0
deadline=$((SECONDS + run_limit_s))
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
  cp "$work/killed.out" "$out"
  : >"$err"
  fail "its JSON held $finished of 4 runs when it was killed, expected some but not all"
fi
echo "     (killed after $finished of 4 splits)"
check "the killed sweep's JSON is valid and holds its finished splits" py '
d = load(sys.argv[1])
if not d["runs"] or any(r["status"] != "ok" for r in d["runs"]): fail("runs %s" % d["runs"])
' "$json"
cp "$json" "$work/killed.json"

tiny_args --batch 8 --steps 30 --resume "$json"
expect 0 "8×1" "Recommendation:" -- sweep "${args[@]}"
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
' "$work/killed.json" "$json"
cli_pass
