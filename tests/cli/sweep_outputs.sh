#!/usr/bin/env bash
# One tiny sweep writes every output format (the ctest fixture cli_sweep, in CLI_DIR/fixtures/sweep);
# the other modes check one format each without rerunning it. One ctest case per mode.
#
#   tests/cli/sweep_outputs.sh BINARY DATA_DIR CLI_DIR CASE write|json|csv|markdown|html|trace
# shellcheck disable=SC2317  # the mode functions are called as "$mode"
source "$(dirname "$0")/lib.sh"
cli_init "$@"

# cli.sweep.writes_every_format (FIXTURES_SETUP cli_sweep)
write() {
  rm -rf "$sweep_dir"
  mkdir -p "$sweep_dir" || fail "cannot make $sweep_dir"
  local s=$sweep_dir
  tiny_args --json "$s/a.json" --csv "$s/a.csv" --markdown "$s/a.md" --html "$s/a.html" --trace "$s/a.trace.json"
  expect 0 "Recommendation:" -- sweep "${args[@]}"
  cp "$out" "$s/sweep.out"
  check "sweep prints a Recommendation: line" grep -qE '^Recommendation: [0-9]+×[0-9]+' "$out"
  check "sweep wrote JSON, CSV, Markdown, HTML and trace" \
    test -s "$s/a.json" -a -s "$s/a.csv" -a -s "$s/a.md" -a -s "$s/a.html" -a -s "$s/a.trace.json"
}

# cli.sweep.output.json
json() {
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
' "$sweep_dir/a.json"
}

# cli.sweep.output.csv
csv() {
  check "CSV has a header and 3 lines of equal width" py '
lines = open(sys.argv[1], encoding="utf-8").read().splitlines()
if len(lines) != 4: fail("%d lines" % len(lines))
if not lines[0].startswith("label,micro_batch,accum_steps"): fail("header " + lines[0])
if len({l.count(",") for l in lines}) != 1: fail("lines of different widths")
if sorted(l.split(",")[0] for l in lines[1:]) != ["1×4", "2×2", "4×1"]: fail("labels")
' "$sweep_dir/a.csv"
}

# cli.sweep.output.markdown
markdown() {
  check "Markdown has a table row per split and the recommendation" py '
text = open(sys.argv[1], encoding="utf-8").read()
rows = [l for l in text.splitlines() if l.startswith("| ") and "×" in l]
if len(rows) != 3: fail("%d split rows" % len(rows))
if "Recommendation" not in text: fail("no recommendation")
' "$sweep_dir/a.md"
}

# cli.sweep.output.html
html() {
  check "HTML is a page naming every split" py '
text = open(sys.argv[1], encoding="utf-8").read()
if not text.lstrip().lower().startswith("<!doctype html"): fail("not an HTML document")
for s in ("1×4", "2×2", "4×1"):
    if s not in text: fail("no " + s)
' "$sweep_dir/a.html"
}

# cli.sweep.output.trace
trace() {
  check "trace is Trace Event JSON with one process per split" py '
events = load(sys.argv[1])["traceEvents"]
names = sorted(e["args"]["name"] for e in events if e.get("name") == "process_name")
if names != ["1×4", "2×2", "4×1"]: fail("processes %s" % names)
if not any(e.get("ph") == "X" for e in events): fail("no complete events")
' "$sweep_dir/a.trace.json"
}

mode=${case_args[0]:-}
case $mode in
  write | json | csv | markdown | html | trace) "$mode" ;;
  *) echo "$case_name: unknown mode \"$mode\"" >&2; exit 2 ;;
esac
cli_pass
