#!/usr/bin/env bash
# Compile-checks the CUDA build on a CPU machine: every LibTorch source of accumbench with the CUDA
# code paths enabled (ACCUMBENCH_WITH_CUDA=1), `-fsyntax-only`, against the LibTorch 2.11 + CUDA 13
# headers in ../shared/toolchains/ and /usr/local/cuda/include. Nothing is linked or run.
# Skips with a message when those headers are not there.
set -euo pipefail
cd "$(dirname "$0")/.."

archive="${ACCUMBENCH_TOOLCHAIN:-../shared/toolchains/libtorch-2.11.0-cu130-headers.tar.xz}"
cuda_include="${CUDA_INCLUDE:-/usr/local/cuda/include}"
if [ ! -f "$archive" ] || [ ! -f "$cuda_include/cuda_runtime_api.h" ]; then
  echo "cuda-compile-check: skipped (no $archive or no $cuda_include/cuda_runtime_api.h)"
  exit 0
fi

headers="${ACCUMBENCH_BUILD_DIR:-build}/libtorch-2.11-headers"
if [ ! -f "$headers/.extracted" ] || [ "$archive" -nt "$headers/.extracted" ]; then
  rm -rf "$headers" && mkdir -p "$headers"
  tar xJf "$archive" -C "$headers"
  touch "$headers/.extracted"
fi

# Every torch source listed in accumbench_core, and the GPU tests.
sources=(tests/test_cuda.cpp)
while read -r extra; do
  case " ${sources[*]} " in *" $extra "*) ;; *) sources+=("$extra") ;; esac
done < <(sed -n '/add_library(accumbench_core/,/)/p' CMakeLists.txt | grep -oE 'src/[A-Za-z0-9_/]+\.cpp')

generated=$(mktemp -d)
trap 'rm -rf "$generated"' EXIT
printf '#pragma once\n#define ACCUMBENCH_VERSION "check"\n#define ACCUMBENCH_GIT_COMMIT "check"\n#define ACCUMBENCH_BUILD_TYPE "check"\n' \
  > "$generated/accumbench_build_info.hpp"

flags=(-std=c++17 -fsyntax-only -DACCUMBENCH_WITH_CUDA=1 -DACCUMBENCH_WITH_NCCL=1 -D_GLIBCXX_USE_CXX11_ABI=1
       -Iinclude -Isrc -I"$generated"
       -isystem "$headers/include" -isystem "$headers/include/torch/csrc/api/include"
       -isystem "$cuda_include")
echo "cuda-compile-check: ${#sources[@]} sources against LibTorch 2.11 + CUDA headers"
pids=()
for src in "${sources[@]}"; do
  g++ "${flags[@]}" "$src" &
  pids+=($!)
  # two at a time on a two-core machine
  if [ ${#pids[@]} -ge "$(nproc)" ]; then wait "${pids[0]}" || { echo "cuda-compile-check: FAILED in an earlier source" >&2; exit 1; }; pids=("${pids[@]:1}"); fi
done
for pid in "${pids[@]}"; do wait "$pid" || { echo "cuda-compile-check: FAILED" >&2; exit 1; }; done
echo "cuda-compile-check: OK"
