#!/bin/sh
# One row of cases.tsv: accumbench verify --export into a scratch directory, then the PyTorch
# reference on it. Usage: cross_check.sh ACCUMBENCH PYTHON DATA_DIR WORK_DIR CASES_TSV NAME
# Exit 77 (ctest's skip) only when PYTHON cannot import torch; the scratch directory is removed
# when the case passes and kept when it fails.
set -u
bin=$1 py=$2 data=$3 work=$4 cases=$5 name=$6
here=$(cd "$(dirname "$0")" && pwd)
check="$here/../../bench/reference/check_export.py"

if ! "$py" -c "import torch" 2>/dev/null; then
  echo "SKIP: $py cannot import torch; install python3-torch (scripts/install-deps.sh)"
  exit 77
fi
row=$(awk -F '\t' -v n="$name" '$1 == n' "$cases")
[ -n "$row" ] || { echo "no row $name in $cases"; exit 1; }
expect=$(printf '%s\n' "$row" | cut -f2)
verify_args=$(printf '%s\n' "$row" | cut -f3 | sed "s|@DATA@|$data|g")
check_args=$(printf '%s\n' "$row" | cut -f4)

dir="$work/$name"
rm -rf "$dir" && mkdir -p "$dir" || exit 1
# shellcheck disable=SC2086  # the options are words
"$bin" verify $verify_args --seq-len 32 --batch 4 --threads 1 --export "$dir/export" > "$dir/verify.txt" 2>&1
status=$?
cat "$dir/verify.txt"
[ $status -eq 0 ] || { echo "accumbench verify exited $status"; exit 1; }
# shellcheck disable=SC2086
"$py" "$check" "$dir/export" $check_args > "$dir/check.txt" 2>&1
status=$?
cat "$dir/check.txt"
case "$expect" in
  pass)
    [ $status -eq 0 ] || { echo "the reference differs (exit $status); expected the same loss and gradients"; exit 1; } ;;
  mismatch)
    [ $status -eq 1 ] && grep -q '^FAIL: accumbench and the reference differ' "$dir/check.txt" ||
      { echo "expected the deliberately wrong reference to FAIL with exit 1, got exit $status"; exit 1; } ;;
  *) echo "$cases: $name: expect is '$expect', not pass or mismatch"; exit 1 ;;
esac
rm -rf "$dir"
