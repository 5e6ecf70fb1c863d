#!/usr/bin/env bash
# Copies the header-only dependencies (CLI11, nlohmann/json) and GoogleTest's sources from this Debian machine into
# .gpu-deps/include, which the device tool can carry to the GPU machine (it has PyTorch but no
# Debian -dev packages and no network). CMake falls back to that folder when find_package fails.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
rm -rf .gpu-deps && mkdir -p .gpu-deps/include
cp -r /usr/include/CLI .gpu-deps/include/
cp -r /usr/include/nlohmann .gpu-deps/include/
cp -r /usr/src/googletest .gpu-deps/googletest   # sources: built there for the GPU tests
mkdir -p .gpu-deps/shared && cp -r ../shared/bench .gpu-deps/shared/   # the PyTorch reference (../shared does not travel)
du -sh .gpu-deps
