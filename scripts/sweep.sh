#!/usr/bin/env bash
# The README's main command: installs what is missing, builds, and runs `accumbench sweep`
# (the built-in default model on whatever device is present), passing any arguments through.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
ACCUMBENCH_TARGET=accumbench scripts/build.sh
exec "${ACCUMBENCH_BUILD_DIR:-build}/accumbench" sweep "$@"
