#!/usr/bin/env bash
# sharing.sh OUTDIR: how ranks share one GPU, measured (after check.sh, on
# the GPU machine, from the same bundle). The first GPU run (docs/gpu-runs/
# 2026-11-26-h100.md) found 4 ranks on one H100 5x slower than 4 CPU ranks:
# the ranks' CUDA contexts take turns on the GPU (time-slicing) unless an MPS
# server runs them in one. This compares, for the default job (500 steps,
# np 4) and vgpu_allreduce_perf (np 2 and 4, 8 KiB to 64 MiB):
#   time-sliced | MPS   x   ring over CUDA IPC | the ring staged through host memory
# and, under an MPS pinned memory limit, caps with and without room for the
# neighbour's arena, which the ring maps (CUDA IPC) and MPS counts against
# the client. The "automatic" rows are what a job gets unasked
# (ring_window_kind: IPC only under MPS without a limit).
# Logs into OUTDIR/sharing.log; the table last. About 2 minutes.
set -uo pipefail
outdir=${1:?usage: scripts/gpu/sharing.sh OUTDIR}
mkdir -p "$outdir"
cd "$(dirname "$0")/../.."
repo=$(pwd)
source scripts/gpu/env.sh
LOG=$outdir/sharing.log
gpu_env_unpack "$repo/gpu-bundle" "$repo" >>"$LOG" 2>&1 || { echo "sharing.sh: no bundle" >&2; exit 1; }
gpu_env_use
command -v ssh >/dev/null || export OMPI_MCA_plm_rsh_agent=false
export OMPI_MCA_btl_vader_single_copy_mechanism=none
B=$GPU_BUILD MPIRUN=$repo/scripts/mpirun.sh
TRAIN=(--set data.path=$GPU_DATA --set train.max_steps=500 --quiet)
ROWS=()
row() { ROWS+=("$(printf '%-34s %s' "$1" "$2")"); echo "sharing.sh: $1: $2"; }
# run LIMIT CMD...: CMD bounded, logged; sets $out and $rc.
run() {
  local limit=$1
  shift
  printf '\n$ %s\n' "$*" >>"$LOG"
  out=$(timeout -k 5 "$limit" "$@" 2>&1 </dev/null)
  rc=$?
  printf '%s\n[exit %s]\n' "$out" "$rc" >>"$LOG"
}
field() { grep -oE "(^| )$1=[^ ]+" <<<"$2" | tail -1 | cut -d= -f2; }
EXTRA=()
train() { # LABEL ENV... : the default job, 500 steps, np 4 (EXTRA: more --set)
  local label=$1
  shift
  run 60 env "$@" "$MPIRUN" -np 4 "$B/vgpu_train" "$repo/configs/default.ini" "${TRAIN[@]}" "${EXTRA[@]}"
  local sum
  sum=$(grep 'vgpu_train: done' <<<"$out" | tail -1)
  row "$label" "exit $rc wall $(field wall_s "$sum") s, step_ms $(field step_ms "$sum"), $(field samples_per_s "$sum") samples/s"
}
allreduce() { # LABEL NP ENV...: vgpu_allreduce_perf; its out-of-place time (us) at each size
  local label=$1 np=$2
  shift 2
  run 60 env "$@" "$MPIRUN" -np "$np" "$B/vgpu_allreduce_perf" -b 8K -e 64M -n 10 -w 3
  row "$label" "exit $rc; us from 8K to 64M: $(awk '!/^#/ && $1 ~ /^[0-9]+$/ && NF >= 13 { printf "%s ", $6 }' <<<"$out")$(grep -m1 -o 'Out of bounds values : [0-9]* [A-Z]*' <<<"$out")"
}

echo "started $(date -u +%FT%TZ) on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)" | tee -a "$LOG"
run 60 env -C "$B" ctest -L '^gpu$' --output-on-failure
row "ctest -L gpu" "exit $rc: $(grep -m1 'tests passed' <<<"$out")"

# ---- time-sliced: each rank its own context ----
train "train np=4 automatic time-sliced"
train "train np=4 IPC time-sliced" VGPU_RING_STAGING=0
train "train np=4 staged time-sliced" VGPU_RING_STAGING=1
allreduce "allreduce np=2 IPC time-sliced" 2 VGPU_RING_STAGING=0
allreduce "allreduce np=2 staged time-sliced" 2 VGPU_RING_STAGING=1
allreduce "allreduce np=4 IPC time-sliced" 4 VGPU_RING_STAGING=0
allreduce "allreduce np=4 staged time-sliced" 4 VGPU_RING_STAGING=1

# ---- MPS: one server runs every rank's kernels ----
export CUDA_MPS_PIPE_DIRECTORY=/tmp/vgpu-mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/vgpu-mps/log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
if nvidia-cuda-mps-control -d >>"$LOG" 2>&1; then
  sleep 1
  train "train np=4 automatic MPS"
  train "train np=4 IPC MPS" VGPU_RING_STAGING=0
  train "train np=4 staged MPS" VGPU_RING_STAGING=1
  allreduce "allreduce np=2 automatic MPS" 2
  allreduce "allreduce np=2 IPC MPS" 2 VGPU_RING_STAGING=0
  allreduce "allreduce np=2 staged MPS" 2 VGPU_RING_STAGING=1
  allreduce "allreduce np=4 automatic MPS" 4
  allreduce "allreduce np=4 IPC MPS" 4 VGPU_RING_STAGING=0
  allreduce "allreduce np=4 staged MPS" 4 VGPU_RING_STAGING=1
  # A pinned limit per client: the ring maps its left neighbour's arena, which
  # MPS counts against the client (check.sh's mps step: "out of memory").
  export CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=5632M
  EXTRA=(--set devices.memory_limit=4G)
  train "train np=4 automatic MPS limit 5.5G cap 4G"
  train "train np=4 IPC MPS limit 5.5G cap 4G" VGPU_RING_STAGING=0
  train "train np=4 staged MPS limit 5.5G cap 4G" VGPU_RING_STAGING=1
  EXTRA=(--set devices.memory_limit=2G)
  train "train np=4 IPC MPS limit 5.5G cap 2G" VGPU_RING_STAGING=0
  EXTRA=()
  unset CUDA_MPS_PINNED_DEVICE_MEM_LIMIT
  echo quit | nvidia-cuda-mps-control >>"$LOG" 2>&1
  tail -20 "$CUDA_MPS_LOG_DIRECTORY"/control.log >>"$LOG" 2>/dev/null
else
  row "MPS" "nvidia-cuda-mps-control -d failed"
fi
{
  echo
  echo "sharing.sh: $(date -u +%FT%TZ)"
  printf '%s\n' "${ROWS[@]}"
} | tee -a "$LOG"
