#!/usr/bin/env bash
# Commands that read the JSON of the cli_sweep fixture (sweep_outputs.sh write): report, compare,
# a sweep under a memory limit between its peaks, --resume of a file from another model. One
# ctest case per mode.
#
#   tests/cli/reread.sh BINARY DATA_DIR CLI_DIR CASE MODE
# shellcheck disable=SC2317  # the mode functions are called as "$mode"
source "$(dirname "$0")/lib.sh"
cli_init "$@"

a_json=$sweep_dir/a.json

# cli.report.reprints_table
report_table() {
  split_lines() { grep -E '^(split|[0-9]+×[0-9]+|Recommendation:)' "$1"; }
  expect 0 "Recommendation:" -- report "$a_json"
  check "report's table and recommendation equal the sweep's" \
    diff <(split_lines "$sweep_dir/sweep.out") <(split_lines "$out")
}

# cli.report.notes_a_diverged_loss: a file whose first split lost its loss to nan in every timed step
# (JSON null) is reprinted with the sweep's note naming that split.
report_diverged() {
  py '
r = load(sys.argv[1])
for step in r["runs"][0]["steps"]: step["loss"] = None
json.dump(r, open(sys.argv[2], "w"))
' "$a_json" "$work/diverged.json"
  expect 0 "is not finite in any timed step: the step diverges" "Recommendation:" -- report "$work/diverged.json"
}

# cli.report.says_the_sweeps_notes: a sweep's note (here --group-by-length on fixed lengths, which
# changes nothing) is kept in its JSON; report says it on stderr as the sweep did, and the
# Markdown and HTML that report writes hold it.
report_notes() {
  local note="--group-by-length acts on samples of different lengths, but with --lengths fixed every sample is T tokens"
  tiny_args --batch 2 --group-by-length --json "$work/noted.json"
  expect 0 "$note" -- sweep "${args[@]}"
  check "the JSON keeps the note" py '
notes = load(sys.argv[1])["notes"]
if len(notes) != 1 or not notes[0].startswith(sys.argv[2]): fail("notes %r" % notes)
' "$work/noted.json" "$note"
  expect 0 "$note" "Recommendation:" -- report "$work/noted.json"
  check "report's note is on stderr, as the sweep's" grep -qF "accumbench: note: $note" "$err"
  expect 0 -- report "$work/noted.json" --markdown "$work/noted.md" --html "$work/noted.html"
  check "the Markdown lists the note" grep -qF -- "- $note" "$work/noted.md"
  check "the HTML has a notes card" grep -qF "<h2>Notes</h2><ul><li>$note" "$work/noted.html"
}

# cli.report.markdown_equals_sweep
report_markdown() {
  expect 0 -- report "$a_json" --markdown "$work/report.md"
  check "report's Markdown equals the sweep's" diff "$sweep_dir/a.md" "$work/report.md"
}

# cli.compare.same_file
compare_self() {
  expect 0 "1×4" "2×2" "4×1" -- compare "$a_json" "$a_json"
  check "compare shows ratio 1.00× for time and peak of every split" py '
rows = split_rows(sys.argv[1])
if len(rows) != 3: fail("%d split rows" % len(rows))
for l in rows:
    if l.split().count("1.00×") != 2: fail("row without two 1.00×: " + l)
' "$out"
}

# A limit halfway between the smallest and the largest peak of the unlimited sweep. The largest
# split is either measured out of memory ("oom", the counting allocator refused) or skipped
# because the memory plan predicts it will not fit ("predicted-oom"); --try-predicted-oom, which
# the predicted-oom message offers, must then measure it and find "oom".
limit_check='
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
    if r["status"] == "predicted-oom" and "--try-predicted-oom" not in r["error"]:
        fail("%s predicted-oom without offering --try-predicted-oom: %r" % (key(r), r["error"]))
    if r["status"] == "ok" and r["peak_allocated_bytes"] > limit: fail("%s peaks over the limit" % key(r))
if limited["context"]["memory_limit_bytes"] != limit: fail("context memory_limit_bytes")
best = limited["runs"][limited["recommendation"]["best_index"]]
if best["status"] != "ok": fail("recommends %s, which is %s" % (key(best), best["status"]))
'
halfway_limit() {
  py '
peaks = sorted(r["peak_allocated_bytes"] for r in load(sys.argv[1])["runs"])
print((peaks[0] + peaks[-1]) // 2)
' "$a_json"
}

# cli.sweep.memory_limit
memory_limit() {
  local limit
  limit=$(halfway_limit) || fail "no peaks in $a_json: $limit"
  tiny_args --memory-limit "${limit}B" --json "$work/limit.json"
  expect 0 "memory limit" "Recommendation:" -- sweep "${args[@]}"
  check "the limited sweep still recommends a split" grep -qE '^Recommendation: [0-9]+×[0-9]+' "$out"
  check "under a limit of $limit bytes the smallest split is ok, the largest oom or predicted-oom" \
    py "$limit_check" "$a_json" "$work/limit.json" "$limit" oom,predicted-oom
}

# cli.sweep.try_predicted_oom
try_predicted_oom() {
  local limit
  limit=$(halfway_limit) || fail "no peaks in $a_json: $limit"
  tiny_args --memory-limit "${limit}B" --try-predicted-oom --json "$work/limit-try.json"
  expect 0 "Recommendation:" -- sweep "${args[@]}"
  check "measured under a limit of $limit bytes, the largest split runs out of memory" \
    py "$limit_check" "$a_json" "$work/limit-try.json" "$limit" oom
}

# cli.resume.refuses_other_model
resume_other_model() {
  cp "$a_json" "$work/other.json"
  tiny_args --model gpt2-mini --resume "$work/other.json"
  expect_user_error "gpt2-tiny" "gpt2-mini" -- sweep "${args[@]}"
  check "a refused resume leaves the file alone" cmp "$a_json" "$work/other.json"
}

mode=${case_args[0]:-}
case $mode in
  report_table | report_diverged | report_notes | report_markdown | compare_self | memory_limit | try_predicted_oom | resume_other_model) "$mode" ;;
  *) echo "$case_name: unknown mode \"$mode\"" >&2; exit 2 ;;
esac
cli_pass
