#!/usr/bin/env bash
# bench_train.sh: training throughput (samples/s) for np = 1, 2, 4 with the
# same config and global batch, measured one after the other in one run.
# Usage: scripts/bench_train.sh [CONFIG.ini] [extra vgpu_train args...]
# Default: Fashion-MNIST, MLP 784-256-128-10, global batch 256, one epoch,
# devices.cpu_threads=1.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/vgpu_train ] || scripts/setup.sh
cfg=${1:-configs/default.ini}
shift || true
common=(--quiet --set train.epochs=1 --set train.batch_size=256 --set model.hidden=256,128
        --set devices.cpu_threads=1 "$@")
echo "# bench_train: $cfg ${common[*]}"
echo "# host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
printf '%4s %14s %12s %10s\n' np samples_per_s vs_np1 test_acc
base=
for np in ${VGPU_BENCH_NPS:-1 2 4}; do
  line=$(scripts/mpirun.sh -np "$np" build/vgpu_train "$cfg" "${common[@]}" | tail -1)
  sps=$(grep -oE 'samples_per_s=[0-9.]+' <<<"$line" | cut -d= -f2)
  acc=$(grep -oE 'test_acc=[0-9.]+' <<<"$line" | cut -d= -f2)
  [ -n "$sps" ] || { echo "np=$np failed: $line" >&2; exit 1; }
  base=${base:-$sps}
  printf '%4d %14.0f %11.2fx %10s\n' "$np" "$sps" "$(echo "$sps / $base" | bc -l)" "$acc"
done
