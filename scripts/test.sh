#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, runs every test (ctest) and the
# CUDA compile-check when the LibTorch 2.11 headers are beside the project.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
scripts/cuda-compile-check.sh
cd "${ACCUMBENCH_BUILD_DIR:-build}"
ctest --output-on-failure -j "$(nproc)" "$@"
