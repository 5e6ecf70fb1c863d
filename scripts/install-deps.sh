#!/usr/bin/env bash
# Installs every system package accumbench needs (Debian 12). Idempotent: when everything is
# already there it checks with dpkg and returns quietly, without touching apt.
set -euo pipefail

packages=(
  cmake g++ git
  libtorch-dev libopenblas0-pthread   # LibTorch 1.13 (CPU); OpenBLAS or matmuls run ~30x slower
  libcli11-dev libfmt-dev nlohmann-json3-dev
  libyaml-cpp-dev                      # --trl-config, --axolotl-config
  libgtest-dev libbenchmark-dev
  libgloo-dev                          # c10d/Gloo multi-process tests
  chromium                             # headless screenshots of the HTML report (tests)
  xz-utils                             # unpacks the LibTorch 2.11 headers for the CUDA compile-check
  python3                              # bench/*.py, and the kernel_diff test
  python3-torch                        # PyTorch 1.13 (CPU) for bench/reference/ and its ctest cases
)

# On the GPU machine the LibTorch inside python3's CUDA PyTorch is used instead of Debian's.
if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  packages=("${packages[@]/libtorch-dev/}")
  packages=("${packages[@]/libopenblas0-pthread/}")
  packages=("${packages[@]/chromium/}")
  packages=("${packages[@]/python3-torch/}")  # the machine's own PyTorch runs the reference
fi

missing=()
for p in "${packages[@]}"; do
  [ -n "$p" ] || continue
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
