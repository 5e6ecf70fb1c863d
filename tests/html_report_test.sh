#!/usr/bin/env bash
# A real CPU sweep rendered to HTML and opened in headless Chromium (ctest: html_report_chromium).
#
#   tests/html_report_test.sh ACCUMBENCH_BINARY SCRATCH_DIR
#
# Checks: the rendered DOM has every chart, every split and the recommendation; the screenshot is
# a real picture; the page names no network resource; `accumbench report` re-renders the saved
# JSON; the Chrome trace is Trace Event Format whose slices nest. Chromium's own stderr noise
# (dbus, GPU) is ignored; its exit status and outputs are not.
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 ACCUMBENCH_BINARY SCRATCH_DIR" >&2
  exit 2
fi
bin=$1
mkdir -p "$2"
dir=$(cd "$2" && pwd)

fail() {
  echo "html_report_test: FAIL: $*" >&2
  exit 1
}

if ! command -v chromium >/dev/null 2>&1; then
  echo "html_report_test: chromium is not installed; run scripts/install-deps.sh (apt-get install chromium)" >&2
  exit 1
fi

rm -f "$dir"/sweep.json "$dir"/report.html "$dir"/report2.html "$dir"/trace.json "$dir"/report.png "$dir"/dom.html

# 1. The sweep: batch 4 on the CPU gives the splits 1×4, 2×2 and 4×1.
rc=0
"$bin" sweep --model gpt2-tiny --seq-len 64 --batch 4 --warmup 1 --steps 2 \
  --json "$dir/sweep.json" --html "$dir/report.html" --trace "$dir/trace.json" \
  > "$dir/sweep.out" 2>&1 || rc=$?
[ "$rc" -eq 0 ] || { cat "$dir/sweep.out" >&2; fail "accumbench sweep exited with $rc"; }
for f in sweep.json report.html trace.json; do
  [ -s "$dir/$f" ] || fail "accumbench sweep did not write $f"
done

# 2. The same page from the saved JSON.
"$bin" report "$dir/sweep.json" --html "$dir/report2.html" > "$dir/report.out" 2>&1 || rc=$?
[ "$rc" -eq 0 ] || { cat "$dir/report.out" >&2; fail "accumbench report exited with $rc"; }
[ -s "$dir/report2.html" ] || fail "accumbench report did not write report2.html"

charts=(chart-step-time chart-throughput chart-memory chart-timeline)
splits=("1×4" "2×2" "4×1")
for id in "${charts[@]}"; do
  grep -qF "id=\"$id\"" "$dir/report2.html" || fail "report2.html (from sweep.json) has no #$id"
done

# 3. Self-contained: the only URL is the SVG namespace.
if grep -oE 'https?://[^"'"'"' )<>]*' "$dir/report.html" | grep -vxF 'http://www.w3.org/2000/svg' | grep -q .; then
  grep -oE 'https?://[^"'"'"' )<>]*' "$dir/report.html" | grep -vxF 'http://www.w3.org/2000/svg' | sort -u >&2
  fail "report.html references the network"
fi

# 4. Headless Chromium: screenshot and the DOM after parsing.
chromium_flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run
  --disable-background-networking --disable-component-update --disable-sync)
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
timeout 120 chromium "${chromium_flags[@]}" --user-data-dir="$profile" --window-size=1280,2400 \
  --screenshot="$dir/report.png" "file://$dir/report.html" > "$dir/chromium-screenshot.log" 2>&1 ||
  { tail -n 20 "$dir/chromium-screenshot.log" >&2; fail "chromium --screenshot exited with an error"; }
timeout 120 chromium "${chromium_flags[@]}" --user-data-dir="$profile" --window-size=1280,2400 \
  --dump-dom "file://$dir/report.html" > "$dir/dom.html" 2> "$dir/chromium-dom.log" ||
  { tail -n 20 "$dir/chromium-dom.log" >&2; fail "chromium --dump-dom exited with an error"; }

[ -s "$dir/dom.html" ] || fail "chromium dumped an empty DOM"
for id in "${charts[@]}"; do
  grep -qF "id=\"$id\"" "$dir/dom.html" || fail "the rendered DOM has no #$id"
done
for label in "${splits[@]}"; do
  grep -qF "$label" "$dir/dom.html" || fail "the rendered DOM does not name the split $label"
done
for id in "${charts[@]}"; do
  # Each chart is an element with class="chart" holding an <svg> the parser accepted.
  python3 - "$dir/dom.html" "$id" <<'PY' || fail "#$id is not a chart with an SVG in the DOM"
import re, sys
dom = open(sys.argv[1], encoding="utf-8").read()
m = re.search(r'<(\w+)[^>]*\bid="%s"[^>]*>' % re.escape(sys.argv[2]), dom)
assert m and 'class="chart"' in m.group(0), "no element with class chart"
assert "<svg" in dom[m.end():m.end() + 400], "no svg inside"
PY
done

# The recommendation from sweep.json, as the page shows it.
python3 - "$dir/sweep.json" "$dir/dom.html" <<'PY' || fail "the rendered DOM does not show the recommendation"
import html, json, sys
sweep = json.load(open(sys.argv[1], encoding="utf-8"))
dom = open(sys.argv[2], encoding="utf-8").read()
rec = sweep["recommendation"]
best = rec["best_index"]
assert best >= 0, "the sweep recommended nothing: %r" % rec
config = sweep["runs"][best]["config"]
label = "%d×%d" % (config["micro_batch"], config["accum_steps"])
assert 'id="recommendation"' in dom, "no #recommendation"
assert '<div class="rec-label">%s' % label in dom, "recommended split %s not shown" % label
reason = html.escape(rec["reason"], quote=False)
assert reason in dom, "reason not shown: %s" % rec["reason"]
print("html_report_test: recommendation %s: %s" % (label, rec["reason"]))
PY

# A blank or broken render compresses to a few KB; a page with charts does not.
[ -f "$dir/report.png" ] || fail "chromium wrote no screenshot"
[ "$(head -c 8 "$dir/report.png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] ||
  fail "report.png is not a PNG"
png_bytes=$(stat -c %s "$dir/report.png")
[ "$png_bytes" -gt 20480 ] || fail "report.png is only $png_bytes bytes: the page did not render"

# 5. The Chrome trace: Trace Event Format, one named process per run, slices nest per thread,
# memory counters present.
python3 - "$dir/trace.json" <<'PY' || fail "trace.json is not a valid nested Chrome trace"
import json, sys
from collections import defaultdict

trace = json.load(open(sys.argv[1], encoding="utf-8"))
assert isinstance(trace, dict) and isinstance(trace.get("traceEvents"), list), "no traceEvents list"
assert trace.get("displayTimeUnit") == "ms", "displayTimeUnit is not ms"
events = trace["traceEvents"]
slices = defaultdict(list)
counters = 0
named = set()
for e in events:
    assert "ph" in e, "event without ph: %r" % e
    if e["ph"] == "X":
        for key in ("ts", "dur", "pid", "tid", "name"):
            assert key in e, "X event without %s: %r" % (key, e)
        assert e["dur"] >= 0, "negative dur: %r" % e
        # Whole nanoseconds: the reporter writes microseconds with three decimals.
        start = round(e["ts"] * 1000)
        slices[(e["pid"], e["tid"])].append((start, round((e["ts"] + e["dur"]) * 1000), e["name"]))
    elif e["ph"] == "C":
        assert e["name"] == "memory" or "peak" in e["name"], "unexpected counter %r" % e
        if e["name"] == "memory":
            assert isinstance(e["args"]["allocated_bytes"], int), "memory counter without allocated_bytes"
            counters += 1
    elif e["ph"] == "M" and e["name"] == "process_name":
        named.add(e["pid"])
assert slices, "no complete (X) events"
assert counters > 0, "no memory counter events"
for (pid, tid), spans in slices.items():
    assert pid in named, "pid %s has slices but no process_name" % pid
    spans.sort(key=lambda s: (s[0], -s[1]))
    open_stack = []
    for start, end, name in spans:
        while open_stack and open_stack[-1][1] <= start:
            open_stack.pop()
        if open_stack:
            p_start, p_end, p_name = open_stack[-1]
            assert end <= p_end, "pid %s tid %s: %r [%d, %d) overlaps %r [%d, %d)" % (
                pid, tid, name, start, end, p_name, p_start, p_end)
        open_stack.append((start, end, name))
print("html_report_test: trace has %d slices in %d threads, %d memory counters" % (
    sum(len(s) for s in slices.values()), len(slices), counters))
PY

echo "html_report_test: OK ($dir/report.png, $png_bytes bytes)"
