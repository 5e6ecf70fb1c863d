#!/usr/bin/env bash
# One row of a CLI table as one ctest case (tests/cli/CMakeLists.txt registers every row).
#
#   tests/cli/expect.sh BINARY DATA_DIR CLI_DIR CASE --user-error user_errors.tsv ROW
#   tests/cli/expect.sh BINARY DATA_DIR CLI_DIR CASE --command    commands.tsv    ROW
#
# Tables are tab-separated, one row per case, '#' starts a comment line:
#   user_errors.tsv: NAME  PATTERNS  ARGUMENTS  [NEEDS]
#   commands.tsv:    NAME  EXIT  PATTERNS  ARGUMENTS  [NEEDS]
# PATTERNS are fixed strings separated by " | " ("-": none). A user error must exit 2 with
# nothing on stdout and exactly one stderr line "accumbench: error: ..." that contains every
# pattern, without a C++ backtrace; a command must exit with EXIT and contain every pattern in
# its stdout or stderr. ARGUMENTS are split at spaces; leading NAME=VALUE words set environment
# variables (a torchrun launch); these words are replaced, in ARGUMENTS and PATTERNS:
#   @TINY@    the tiny sweep's options (lib.sh tiny_args); later options of the same name replace
#             their defaults, the others are appended
#   @VERIFY@  the same for verify (no --warmup, --steps)
#   @DATA@ tests/data   @INPUTS@ the token and result files of make_inputs.py
#   @SWEEP@ the outputs of cli.sweep.writes_every_format   @WORK@ this case's scratch directory
#   @PORT@ a free TCP port on 127.0.0.1   @EMPTY@ an empty argument ("")
# NEEDS "no-gpu": skipped (exit 77) where nvidia-smi lists a GPU.
source "$(dirname "$0")/lib.sh"
cli_init "$@"

if [ "${#case_args[@]}" -ne 3 ]; then
  echo "usage: $0 BINARY DATA_DIR CLI_DIR CASE --user-error|--command TABLE ROW" >&2
  exit 2
fi
mode=${case_args[0]}
table=${case_args[1]}
row=${case_args[2]}

found=0
while IFS=$'\t' read -r -a columns; do
  if [ "${#columns[@]}" -gt 0 ] && [ "${columns[0]}" = "$row" ]; then found=1; break; fi
done < <(grep -v '^#' "$table")
[ "$found" -eq 1 ] || { echo "$case_name: no row \"$row\" in $table" >&2; exit 2; }

case $mode in
  --user-error) want_rc=2; patterns_column=${columns[1]}; args_column=${columns[2]}; needs=${columns[3]:-} ;;
  --command) want_rc=${columns[1]}; patterns_column=${columns[2]}; args_column=${columns[3]}; needs=${columns[4]:-} ;;
  *) echo "$case_name: unknown mode $mode" >&2; exit 2 ;;
esac

case $needs in
  "" | -) ;;
  no-gpu) if has_gpu; then skip "this machine has a GPU"; fi ;;
  *) echo "$case_name: unknown NEEDS \"$needs\" in $table" >&2; exit 2 ;;
esac

port=""
expand() {  # expand TEXT: prints TEXT with the @...@ words replaced
  local text=$1
  if [[ $text == *@PORT@* ]] && [ -z "$port" ]; then port=$(free_port); fi
  text=${text//@DATA@/$data}
  text=${text//@INPUTS@/$inputs}
  text=${text//@SWEEP@/$sweep_dir}
  text=${text//@WORK@/$work}
  text=${text//@PORT@/$port}
  text=${text//@EMPTY@/}
  printf '%s' "$text"
}

patterns=()
if [ "$patterns_column" != "-" ]; then
  rest=$patterns_column
  while :; do
    patterns+=("$(expand "${rest%% | *}")")
    [[ $rest == *" | "* ]] || break
    rest=${rest#* | }
  done
fi

read -r -a words <<<"$args_column"
command_args=()
environment=()
for ((i = 0; i < ${#words[@]}; i++)); do
  word=$(expand "${words[i]}")
  if [ "${#command_args[@]}" -eq 0 ] && [[ $word =~ ^[A-Z_][A-Z0-9_]*= ]]; then
    environment+=("$word")
  elif [ "$word" = @TINY@ ] || [ "$word" = @VERIFY@ ]; then
    rest_words=()
    for ((j = i + 1; j < ${#words[@]}; j++)); do rest_words+=("$(expand "${words[j]}")"); done
    if [ "$word" = @TINY@ ]; then tiny_args "${rest_words[@]}"; else tiny_verify_args "${rest_words[@]}"; fi
    command_args+=("${args[@]}")
    break
  else
    command_args+=("$word")
  fi
done

for assignment in "${environment[@]}"; do
  export "${assignment?}"  # NAME=VALUE
  command_prefix+="$assignment "
done
if [ "$mode" = --user-error ]; then
  expect_user_error "${patterns[@]}" -- "${command_args[@]}"
else
  expect "$want_rc" "${patterns[@]}" -- "${command_args[@]}"
fi
cli_pass
