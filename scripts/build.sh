#!/usr/bin/env bash
# Configures and builds accumbench into build/ (Release). Uses the LibTorch inside python3's
# PyTorch when that PyTorch has CUDA (the GPU machine), Debian's libtorch-dev 1.13 otherwise.
# ACCUMBENCH_TARGET=accumbench builds only the CLI (the main command does not need the tests);
# several targets are separated by spaces or commas.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${ACCUMBENCH_BUILD_DIR:-build}"

configure_args=(-DCMAKE_BUILD_TYPE=Release)
if torch_prefix=$(python3 -c 'import torch, sys; assert torch.cuda.is_available(); print(torch.utils.cmake_prefix_path)' 2>/dev/null); then
  configure_args+=(-DCMAKE_PREFIX_PATH="$torch_prefix" -DCMAKE_CUDA_ARCHITECTURES="${ACCUMBENCH_CUDA_ARCH:-90}")
  # nccl.h for c10d's NCCL backend (data parallel), from the nvidia-nccl wheel beside PyTorch.
  if nccl_include=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "include"))' 2>/dev/null); then
    configure_args+=(-DACCUMBENCH_NCCL_INCLUDE_DIR="$nccl_include")
  fi
fi
# The GPU machine's image has CMake and ninja; make is not promised there.
if ! command -v make >/dev/null 2>&1 && command -v ninja >/dev/null 2>&1 && [ ! -f "$build_dir/CMakeCache.txt" ]; then
  configure_args+=(-G Ninja)
fi
# Configuring again is quick and refreshes the git commit recorded in every report.
cmake -S . -B "$build_dir" "${configure_args[@]}" "$@" >/dev/null

target_args=()
targets="${ACCUMBENCH_TARGET:-}"
for target in ${targets//,/ }; do target_args+=(--target "$target"); done
# Print compiler diagnostics, not the progress lines.
set +e
cmake --build "$build_dir" -j "$(nproc)" "${target_args[@]}" > "$build_dir/build.log" 2>&1
status=$?
set -e
if [ $status -ne 0 ]; then
  grep -vE '^\[ *[0-9]+%\]' "$build_dir/build.log" | tail -n 80 >&2
  echo "build: failed (full log: $build_dir/build.log)" >&2
  exit $status
fi
