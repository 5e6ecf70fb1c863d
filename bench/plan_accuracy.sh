#!/usr/bin/env bash
# The memory plan's error distribution on drawn shapes (issue 11): CASES cases (default 500) of
# seed SEED (default 2026; the CI test, ctest -R plan_properties, runs 60 cases of seed 1) from the
# generator in tests/plan_properties.cpp, each measured on the CPU with the counting allocator and
# compared with the plan. Prints every case, the failures with their config.json and commands,
# and the distribution (max, p95, by knob, by precision, by family, per phase) as Markdown.
#   bench/plan_accuracy.sh                     # build/accumbench_plan_properties must exist
#   CASES=1000 SEED=3 bench/plan_accuracy.sh > bench/plan_accuracy-$(date -u +%F).md
# Runs from a scratch directory: failing cases write their config.json there.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${BIN:-$root/build/accumbench_plan_properties}"
[ -x "$bin" ] || { echo "build it first: cmake --build build --target accumbench_plan_properties" >&2; exit 2; }
cases="${CASES:-500}"
seed="${SEED:-2026}"
scratch="${SCRATCH:-$root/build/plan_accuracy}"
mkdir -p "$scratch"
cd "$scratch"
start=$SECONDS
echo "# Plan accuracy on drawn shapes"
echo
echo "\`CASES=$cases SEED=$seed bench/plan_accuracy.sh\`, $(date -u +%F), commit $(git -C "$root" rev-parse --short HEAD)," \
     "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), LibTorch CPU, counting allocator."
echo
echo '```'
status=0
"$bin" --seed "$seed" --cases "$cases" --summary > out.txt || status=$?
sed -n '/^Error of the predicted peak/q;p' out.txt
echo '```'
sed -n '/^Error of the predicted peak/,$p' out.txt
echo
echo "Wall time $((SECONDS - start)) s; exit status $status (1: some case outside the bar)."
