#!/usr/bin/env bash
# setup.sh: install the Debian packages vgpu needs (only those missing), then
# configure and build into build/. Safe to run again. Extra arguments go to
# cmake's configure step (e.g. -DVGPU_CUDA=OFF).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install_packages.sh gcc make cmake pkg-config openmpi-bin libopenmpi-dev libopenblas-dev \
  libdnnl-dev zlib1g-dev libinih-dev libcmocka-dev dataset-fashion-mnist fortunes

build=${VGPU_BUILD_DIR:-build}
mkdir -p "$build"
if ! cmake -B "$build" -S . "$@" >"$build/configure.log" 2>&1; then
  cat "$build/configure.log" >&2
  exit 1
fi
sed -n '/vgpu .* configuration/,/^-- $/p' "$build/configure.log"
if ! cmake --build "$build" -j"$(nproc)" >"$build/build.log" 2>&1; then
  grep -E -A5 'error|Error' "$build/build.log" | head -60 >&2
  echo "setup.sh: build failed; full log in $build/build.log" >&2
  exit 1
fi
echo "setup.sh: built $build/ (vgpu_train, tests)"
