#!/usr/bin/env bash
# check.sh: the GPU check of issue 30, one command (docs/gpu-runs/README.md).
#
#   scripts/gpu/check.sh OUTDIR [--dry-run [--quick]] [--bundle DIR] [--build DIR]
#
# On the GPU machine: unpacks the bundle (scripts/gpu/bundle.sh made it; the
# device tool carries gpu-bundle/) under /tmp/vgpu-gpu, then runs each step
# under its own time limit, never stopping at a failure: the GPU's facts,
# NCCL's version, mpirun; the GPU tests (ctest -L gpu); the README's job with
# 4 ranks on the one GPU beside 1 rank and the CPU-simulated run; a rank past
# its cap; all-reduce bandwidth on the GPU (vgpu_allreduce_perf: the ring over
# CUDA IPC, through host staging, NCCL) beside the device's copy bandwidth,
# and on the host's CPU devices; the device collectives (ranks sharing the
# GPU: bandwidth, synccheck, the job at 1, 2, 4 ranks, a killed rank);
# deterministic mode;
# a rank killed with kill -9; compute-sanitizer; MPS; PyTorch DDP with gloo
# and nccl; probes. Full logs go to OUTDIR (8 files, each cut to 15 MiB);
# the table comes last. The whole check keeps within VGPU_CHECK_BUDGET_S
# (default 450 s): a step that would start past it is a SKIP that says so.
#
# --dry-run: the same script on a machine without a GPU (CI, this Debian
# machine): the steps run on CPU devices or the simulated driver
# (VGPU_SIM_GPUS) where that means something, and a step that needs a GPU
# prints SKIP(dry-run: needs a GPU). Without --bundle it uses the build in
# --build DIR (default $VGPU_BUILD_DIR, else build/) and the system's Open MPI.
# --quick (with --dry-run): every step, but short jobs (300 training steps,
# accuracy not checked; small all-reduces): the bundle's rehearsal runs it.
#
# Exit status: 0 when no step failed, 1 otherwise, 2 bad usage.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
usage() { sed -n '4p' "$0" | sed 's/^# *//' >&2; exit 2; }
outdir="" dry=0 quick=0 bundle="" build=""
while [ $# -gt 0 ]; do
  case $1 in
    --dry-run) dry=1 ;;
    --quick) quick=1 ;;
    --bundle) bundle=${2:?}; shift ;;
    --build) build=${2:?}; shift ;;
    -h|--help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "check.sh: unknown option $1" >&2; usage ;;
    *) [ -z "$outdir" ] || usage; outdir=$1 ;;
  esac
  shift
done
[ -n "$outdir" ] || usage
[ "$quick" = 0 ] || [ "$dry" = 1 ] || { echo "check.sh: --quick goes with --dry-run" >&2; usage; }
mkdir -p "$outdir" && outdir=$(cd "$outdir" && pwd) || { echo "check.sh: cannot make $outdir" >&2; exit 2; }
[ "$dry" = 1 ] || [ -n "$bundle" ] || bundle=$repo/gpu-bundle
source "$repo/scripts/gpu/env.sh"

T0=$SECONDS
BUDGET=${VGPU_CHECK_BUDGET_S:-450}
WORK=$(mktemp -d /tmp/vgpu-check.XXXXXX)
export VGPU_FLIGHT_DIR=$WORK/flight
SUMMARY=$outdir/summary.txt
L_FACTS=$outdir/facts.log L_CTEST=$outdir/ctest.log L_TRAIN=$outdir/train.log
L_AR=$outdir/allreduce.log L_FAULTS=$outdir/faults.log L_SAN=$outdir/sanitizer.log
L_PT=$outdir/pytorch.log
rm -f "$SUMMARY" "$L_FACTS" "$L_CTEST" "$L_TRAIN" "$L_AR" "$L_FAULTS" "$L_SAN" "$L_PT"
bg_pids=()
cleanup() {
  local p
  for p in "${bg_pids[@]}"; do kill "$p" 2>/dev/null; done
  rm -rf "$WORK"
}
trap cleanup EXIT

# ---- helpers ----
T_STEP=() T_RES=() T_FIG=()
# record STEP RESULT FIGURE: one row of the table (RESULT: PASS, FAIL or SKIP(reason)).
record() {
  T_STEP+=("$1") T_RES+=("$2") T_FIG+=("$3")
  printf 'check.sh: [%4ds] %-24s %s  %s\n' $((SECONDS - T0)) "$1" "$2" "$3"
}
# run LOG LIMIT CMD...: CMD bounded by LIMIT seconds (and what is left of the
# budget), its output appended to LOG and kept in $out; sets $rc and $secs.
run() {
  local log=$1 limit=$2 left t0
  shift 2
  left=$((BUDGET - (SECONDS - T0)))
  [ "$left" -lt "$limit" ] && limit=$((left > 5 ? left : 5))
  printf '\n$ %s\n' "$*" >>"$log"
  t0=$EPOCHREALTIME
  out=$(timeout -k 5 "$limit" "$@" 2>&1 </dev/null)
  rc=$?
  secs=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  printf '%s\n[exit %s after %s s (limit %s s)]\n' "$out" "$rc" "$secs" "$limit" >>"$log"
}
# time_left STEP [NEED_S]: true while NEED_S (default 20) seconds of the budget are left;
# else the step is recorded as skipped for time.
time_left() {
  [ $((BUDGET - (SECONDS - T0))) -ge "${2:-20}" ] && return 0
  record "$1" "SKIP(time: the ${BUDGET} s budget is spent)" ""
  return 1
}
# need_gpu STEP: true on a GPU run; else the step is a SKIP (dry run) or a FAIL.
need_gpu() {
  [ "$gpu" = 1 ] && return 0
  if [ "$dry" = 1 ]; then record "$1" "SKIP(dry-run: needs a GPU)" ""
  else record "$1" FAIL "no GPU visible (nvidia-smi -L failed)"; fi
  return 1
}
field() { grep -oE "(^| )$1=[^ ]+" <<<"$2" | tail -1 | cut -d= -f2; }
ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 >= b + 0) }'; }
# procs_of PATTERN: pids whose command line holds PATTERN (no procps needed).
procs_of() {
  # (the pattern through a file: grep's own command line must not match)
  grep -laF -f <(printf '%s\n' "$1") /proc/[0-9]*/cmdline 2>/dev/null | cut -d/ -f3
}
gpu_mem_used() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -1 | tr -d ' '; }
gpu_apps() { nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>/dev/null; }

# ---- the bundle, or the build in hand ----
{
  # With a bundle its MANIFEST says which commit it and the tree are (the GPU
  # machine's copy of .git, where it has one, is not the tree's: seen there
  # naming an older commit).
  if [ -n "$bundle" ]; then
    echo "check.sh $(sed -n 's/^git: //p' "$bundle/MANIFEST.txt" 2>/dev/null || echo '(no MANIFEST)') (from the bundle's MANIFEST)"
  elif git -C "$repo" rev-parse HEAD >/dev/null 2>&1; then
    echo "check.sh $(git -C "$repo" rev-parse HEAD)$(git -C "$repo" diff --quiet HEAD -- . ':!gpu-bundle' 2>/dev/null || echo ' with uncommitted changes')"
  else
    echo "check.sh (no git, no bundle)"
  fi
  echo "started $(date -u +%Y-%m-%dT%H:%M:%SZ); mode $([ "$dry" = 1 ] && echo dry-run || echo GPU); budget ${BUDGET} s"
} >"$L_FACTS"
if [ -n "$bundle" ]; then
  t0=$EPOCHREALTIME
  out=$(gpu_env_unpack "$bundle" "$repo" 2>&1)
  rc=$?
  secs=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  printf '%s\n' "$out" >>"$L_FACTS"
  made=$(sed -n 's/^git: //p' "$bundle/MANIFEST.txt" 2>/dev/null)
  # The tree beside the bundle must be the one it was made from (no .git travels: the sums).
  changed=$(cd "$repo" && sha256sum -c --quiet "$bundle/tree.sha256" 2>/dev/null | cut -d: -f1 | paste -sd' ')
  if [ "$rc" = 0 ] && [ -z "$changed" ]; then
    record "bundle" PASS "unpacked in ${secs} s into $GPU_ROOT; made from ${made:-?}; the tree matches it"
  elif [ "$rc" = 0 ] && [ "$dry" = 1 ]; then
    record "bundle" PASS "unpacked in ${secs} s; made from ${made:-?}; the tree differs in $(wc -w <<<"$changed") files (a dry run: noted)"
  elif [ "$rc" = 0 ]; then
    record "bundle" FAIL "the tree differs from the one the bundle was made from (run bundle.sh again): ${changed:0:200}"
  else
    record "bundle" FAIL "$(tail -1 <<<"$out")"
  fi
  cat "$bundle/MANIFEST.txt" >>"$L_FACTS" 2>/dev/null
  gpu_env_use
  B=$GPU_BUILD DATA=$GPU_DATA
  # A bundle without the data (bundle.sh --no-data: the rehearsal's) uses the host's.
  [ -d "$DATA" ] || DATA=/usr/share/datasets/fashion-mnist
else
  B=${build:-${VGPU_BUILD_DIR:-$repo/build}}
  DATA=/usr/share/datasets/fashion-mnist
  record "bundle" "SKIP(dry-run: no bundle; build $B, the system's Open MPI)" ""
fi
# Open MPI 4 refuses to start without an ssh/rsh agent on the PATH, even on one
# host; the GPU image has none.
if ! command -v ssh >/dev/null && ! command -v rsh >/dev/null; then
  export OMPI_MCA_plm_rsh_agent=false
  echo "no ssh/rsh: OMPI_MCA_plm_rsh_agent=false" >>"$L_FACTS"
fi
# vader's single-copy (CMA, process_vm_readv) is refused in some sandboxes.
export OMPI_MCA_btl_vader_single_copy_mechanism=none
TRAIN=$B/vgpu_train VGPURUN=$B/vgpurun PERF=$B/vgpu_allreduce_perf CAP=$B/test_api_cap
MPIRUN=$repo/scripts/mpirun.sh
CFG=$repo/configs/default.ini SYN=$repo/configs/synthetic_small.ini
DATASET=(--set "data.path=$DATA")

# ---- facts: the machine, the GPU, NCCL, mpirun ----
gpu=0
if [ "$dry" = 0 ] && nvidia-smi -L >/dev/null 2>&1; then gpu=1; fi
SIM=(env)
[ "$dry" = 1 ] && SIM=(env VGPU_SIM_GPUS=1x80G) # the simulated driver: one 80 GB GPU
{
  echo "== machine"
  uname -a
  echo "cpus $(nproc): $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
  grep -E 'MemTotal' /proc/meminfo
  [ -r /etc/os-release ] && grep PRETTY_NAME /etc/os-release
  echo "== tools"
  for t in nvidia-smi nvcc compute-sanitizer nvidia-cuda-mps-control python3 cmake ctest ninja mpirun ssh ps pgrep bc xz nm gcc cc; do
    printf '%-24s %s\n' "$t" "$(command -v "$t" || echo missing)"
  done
  echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
  echo "NCCL from: ${GPU_NCCL_DIR:-(not added; the loader's)}; cuBLAS from: ${GPU_CUBLAS_DIR:-(the loader's)}"
  ldconfig -p 2>/dev/null | grep -E 'lib(cuda|nvidia-ml|cublas|nccl)\.so' || true
  echo "OPAL_PREFIX=${OPAL_PREFIX:-}"
} >>"$L_FACTS" 2>&1
GPU_UUID=""
if [ "$gpu" = 1 ]; then
  run "$L_FACTS" 30 nvidia-smi -q
  q=$(nvidia-smi --query-gpu=name,driver_version,compute_mode,mig.mode.current,ecc.mode.current,memory.total,memory.used,uuid --format=csv,noheader 2>&1 | head -1)
  echo "query: $q" >>"$L_FACTS"
  IFS=, read -r g_name g_drv g_mode g_mig g_ecc g_total g_used GPU_UUID <<<"$q"
  GPU_UUID=${GPU_UUID# }
  mps=$(command -v nvidia-cuda-mps-control || echo "none")
  record "gpu facts" PASS "$g_name, driver$g_drv, compute$g_mode, MIG$g_mig, ECC$g_ecc,$g_total (used$g_used); MPS control: $mps; kernel $(uname -r)"
else
  need_gpu "gpu facts"
fi
nccl_py='import ctypes, os, sys
try:
    import nvidia.nccl as m
except Exception as e:
    print("no nvidia.nccl module:", e); sys.exit(3)
lib = os.path.join(list(m.__path__)[0], "lib", "libnccl.so.2")
v = ctypes.c_int(0)
ctypes.CDLL(lib).ncclGetVersion(ctypes.byref(v))
print(lib, v.value)'
NCCL_CODE=0
run "$L_FACTS" 60 python3 -c "$nccl_py"
if [ "$rc" = 0 ]; then
  NCCL_CODE=$(awk 'END { print $2 }' <<<"$out")
  NCCL_VER="$((NCCL_CODE / 10000)).$((NCCL_CODE % 10000 / 100)).$((NCCL_CODE % 100))"
  record "nccl (wheel)" PASS "NCCL $NCCL_VER in $(awk 'END { print $1 }' <<<"$out")"
elif [ "$dry" = 1 ]; then
  record "nccl (wheel)" "SKIP(dry-run: no NCCL wheel here)" ""
else
  record "nccl (wheel)" FAIL "$(tail -1 <<<"$out")"
fi
run "$L_FACTS" 30 mpirun --version
if [ "$rc" = 0 ]; then record "mpirun" PASS "$(head -1 <<<"$out") ($(command -v mpirun))"
else record "mpirun" FAIL "$(tail -1 <<<"$out")"; fi

# ---- the GPU tests ----
if time_left "ctest -L gpu"; then
  if command -v ctest >/dev/null; then
    run "$L_CTEST" 180 env -C "$B" ctest -L '^gpu$' --output-on-failure --timeout 150
  else
    run "$L_CTEST" 150 "$B/test_device_cpu" cuda
  fi
  ran=$(grep -oE '[0-9]+ tests? (passed|failed)|tests passed, [0-9]+ tests failed out of [0-9]+' <<<"$out" | tail -1)
  if grep -qE 'Skipped|Not Run|exit 77' <<<"$out" || [ "$rc" = 77 ]; then
    if [ "$dry" = 1 ]; then record "ctest -L gpu" "SKIP(dry-run: needs a GPU)" "ran; test_device_cuda skipped itself"
    else record "ctest -L gpu" FAIL "skipped on the GPU machine: $(grep -m1 -E 'Skipped|SKIP' <<<"$out")"; fi
  elif [ "$rc" = 0 ] && grep -q 'tests passed' <<<"$out"; then
    record "ctest -L gpu" PASS "$(grep -m1 'tests passed' <<<"$out")"
  else
    record "ctest -L gpu" FAIL "exit $rc: $ran $(grep -m1 -E 'Failed|\*\*\*' <<<"$out")"
  fi
fi

# ---- the README's job on the one GPU ----
# A quick dry run trains 300 steps: its accuracy means nothing.
QUICK_TRAIN=() ACC_MIN=0.89
[ "$quick" = 1 ] && QUICK_TRAIN=(--set train.max_steps=300) ACC_MIN=0
# train_run STEP NP ARGS...: vgpu_train on the default config; sets $sum (its
# summary line) and $acc, $wall, $status.
train_run() {
  local step=$1 np=$2
  shift 2
  run "$L_TRAIN" 150 "${SIM[@]}" "$MPIRUN" -np "$np" "$TRAIN" "$CFG" "${DATASET[@]}" "${QUICK_TRAIN[@]}" "$@"
  sum=$(grep 'vgpu_train: done' <<<"$out" | tail -1)
  acc=$(field test_acc "$sum") wall=$(field wall_s "$sum") status=$(field status "$sum")
}
if time_left "train np=4 (headline)" 60; then
  sampler=""
  if [ "$gpu" = 1 ]; then
    (while :; do echo "t=$SECONDS"; gpu_apps; sleep 0.5; done) >"$WORK/smi.txt" 2>&1 &
    sampler=$!
    bg_pids+=("$sampler")
  fi
  train_run "train np=4" 4
  [ -n "$sampler" ] && kill "$sampler" 2>/dev/null
  table=$(grep -E '^vgpu: 1 (simulated )?physical GPU -> 4 virtual GPUs' <<<"$out")
  caps=$(awk '$1 ~ /^[0-3]$/ && $(NF-2) ~ /^vgpu[0-3]$/ { print $(NF-1) $NF }' <<<"$out" | sort -u | paste -sd,)
  why=""
  [ "$rc" = 0 ] || why="$why exit $rc;"
  [ -n "$table" ] || why="$why no '1 physical GPU -> 4 virtual GPUs' table;"
  [ "$status" = ok ] || why="$why status=$status;"
  grep -q 'data=fashion-mnist' <<<"$sum" || why="$why not trained on Fashion-MNIST;"
  ge "${acc:-0}" "$ACC_MIN" || why="$why test_acc $acc < $ACC_MIN;"
  smi=""
  if [ "$gpu" = 1 ]; then
    { echo "--- nvidia-smi --query-compute-apps during the run (pid, MiB)"; cat "$WORK/smi.txt"; } >>"$L_TRAIN"
    most=$(awk '/^t=/ { if (n > m) m = n; n = 0; next } /^[0-9]/ { n++ } END { if (n > m) m = n; print m + 0 }' "$WORK/smi.txt")
    mib=$(awk -F', *' '/^[0-9]/ && $2 > m { m = $2 } END { print m + 0 }' "$WORK/smi.txt")
    smi=", nvidia-smi: up to $most processes, largest ${mib} MiB"
    [ "$most" = 4 ] || why="$why nvidia-smi showed $most processes at once, not 4;"
    # Each within its cap plus its context (the table's cap; 1 GiB for the context).
    capmib=$(awk '$1 ~ /^[0-3]$/ && $(NF-2) ~ /^vgpu[0-3]$/ { v = $(NF-1); u = $NF;
                   v *= (u == "GiB" ? 1024 : u == "MiB" ? 1 : u == "TiB" ? 1048576 : 1 / 1024); print int(v) }' <<<"$out" | sort -n | head -1)
    [ -n "$capmib" ] && ! ge $((capmib + 1024)) "$mib" && why="$why a process used ${mib} MiB > cap ${capmib} MiB + 1 GiB;"
  else
    smi=", nvidia-smi: not sampled (no GPU)"
  fi
  w4=$wall a4=$acc
  [ "$quick" = 1 ] && smi="$smi (quick: 300 steps, accuracy not checked)"
  if [ -z "$why" ]; then record "train np=4 (headline)" PASS "acc $acc, wall ${wall} s, caps $caps$smi"
  else why=${why%;}; record "train np=4 (headline)" FAIL "${why# }; acc $acc, wall ${wall} s$smi"; fi
  if time_left "train np=1" 40; then
    train_run "train np=1" 1
    if [ "$rc" = 0 ] && [ "$status" = ok ] && ge "${acc:-0}" "$ACC_MIN"; then
      record "train np=1" PASS "acc $acc, wall ${wall} s ($(field devices "$sum"))"
    else record "train np=1" FAIL "exit $rc, status=$status, acc $acc"; fi
    w1=$wall
  fi
  if time_left "train np=4 CPU" 40; then
    sim_saved=("${SIM[@]}")
    SIM=(env)
    train_run "train np=4 CPU" 4 --set devices.kind=cpu
    SIM=("${sim_saved[@]}")
    if [ "$rc" = 0 ] && [ "$status" = ok ]; then
      record "train np=4 CPU" PASS "acc $acc, wall ${wall} s; wall np=4 GPU ${w4:-?} s, np=1 GPU ${w1:-?} s, np=4 CPU ${wall} s$([ "$dry" = 1 ] && echo ' (dry run: the GPUs are simulated, CPU math)')"
    else record "train np=4 CPU" FAIL "exit $rc, status=$status"; fi
  fi
fi

# ---- the projection against this GPU (issue 35, item 4) ----
# Short traced runs: on this machine's CPU (what a user measures before they
# have the GPU), calibrated by project_calibrate.sh, projected onto one H100
# (configs/targets/h100_nvlink_8.ini, 1 GPU; 4 ranks sharing it as 4 GPUs of
# a quarter of its peak and memory rate each, linked at its copy rate), then
# measured on the GPU. The figure is each error; the model's known blind spot
# (kernel launches, small GEMMs far from peak: docs/PROJECTION.md) is the
# point of measuring it.
if time_left "projection (1 GPU)" 50; then
  P=$WORK/projection
  mkdir -p "$P"
  short=(--set train.max_steps=200 --quiet)
  proj_step() { # TRACE ARGS...: the projected step time (ms) of the table's one row
    "$B/vgpu-project" --trace "$1" --target "$repo/configs/targets/h100_nvlink_8.ini" \
      --measured-on "$P/cal.ini" "${@:2}" 2>&1 | tee -a "$L_TRAIN" | awk '$1 ~ /^[0-9]+$/ && NF >= 10 { s = $3 } END { print s }'
  }
  measured_step() { # TRACE: the trace's measured step time (ms)
    "$B/vgpu-project" --trace "$1" --target "$repo/configs/targets/h100_nvlink_8.ini" --set device.measured=true --ranks 1 2>&1 |
      tee -a "$L_TRAIN" | sed -n 's/.*measured: step \([0-9.]*\) ms.*/\1/p'
  }
  run "$L_TRAIN" 30 env VGPU_BUILD_DIR="$B" "$repo/scripts/project_calibrate.sh" "$P/cal.ini"
  cal_rc=$rc cal_msg=$(tail -1 <<<"$out")
  for np in 1 4; do
    run "$L_TRAIN" 40 "$MPIRUN" -np "$np" "$TRAIN" "$CFG" "${DATASET[@]}" "${short[@]}" --set devices.kind=cpu --trace "$P/cpu$np.json"
    run "$L_TRAIN" 40 "${SIM[@]}" "$MPIRUN" -np "$np" "$TRAIN" "$CFG" "${DATASET[@]}" "${short[@]}" --trace "$P/gpu$np.json"
  done
  quarter=(--set target.gpus_per_host=4 --set device.fp32_tflops=16.75 --set device.memory_gbyte_per_s=837.5
           --set intra.link=one-GPU --set intra.gbit_per_s=26800 --set intra.latency_us=3.4)
  p1=$(proj_step "$P/cpu1.json" --ranks 1) m1=$(measured_step "$P/gpu1.json")
  p4=$(proj_step "$P/cpu4.json" --ranks 4 "${quarter[@]}") m4=$(measured_step "$P/gpu4.json")
  err() { awk -v p="$1" -v m="$2" 'BEGIN { if (m > 0 && p != "") printf "%+.0f%%", 100 * (p - m) / m; else printf "?" }'; }
  fig="1 rank: projected ${p1:-?} ms, measured ${m1:-?} ms ($(err "$p1" "$m1")); 4 ranks: projected ${p4:-?} ms, measured ${m4:-?} ms ($(err "$p4" "$m4"))"
  if [ "$cal_rc" = 0 ] && [ -n "$p1" ] && [ -n "$m1" ] && [ -n "$p4" ] && [ -n "$m4" ]; then
    record "projection (1 GPU)" PASS "$fig$([ "$dry" = 1 ] && echo ' (dry run: simulated GPU, CPU math)')"
  else record "projection (1 GPU)" FAIL "calibration exit $cal_rc$([ "$cal_rc" != 0 ] && echo " ($cal_msg)"); $fig"; fi
fi

# ---- the GPU's lanes facts (issue 47 item 2): measured, for the GPU targets ----
# vgpu_device_probe on the GPU: a launch (a 1-element kernel's call), the
# shortest kernel, a wait, the copy rates; the GPU targets carry published
# figures until a record has these.
if need_gpu "device probe" && time_left "device probe" 20; then
  run "$L_TRAIN" 30 "$B/vgpu_device_probe" -k cuda
  if [ "$rc" = 0 ] && grep -q '^launch_us = ' <<<"$out"; then
    record "device probe" PASS "$(grep -E '^(launch_us|kernel_min_us|sync_us|host_link_gbyte_per_s) = ' <<<"$out" | sed 's/ = /=/' | paste -sd' ')"
  else record "device probe" FAIL "exit $rc: $(tail -1 <<<"$out" | cut -c1-200)"; fi
fi

# ---- a rank past its cap (tests/api_cap.c: libvgpu's public API, so it binds the GPU) ----
if time_left "cap overrun"; then
  run "$L_FAULTS" 60 "${SIM[@]}" "$MPIRUN" -np 4 "$CAP" 2
  msg=$(grep -m1 -E '^\[rank 2@[^]]+\] error: device memory cap exceeded: requested 32.0 MiB, in use 40.0 MiB of 64.0 MiB \(virtual GPU 2 on physical device cuda0\)' <<<"$out")
  crash=$(grep -m1 -iE 'CUDA error|cudaError|Segmentation|core dumped|illegal memory' <<<"$out")
  if [ "$rc" != 0 ] && [ "$rc" != 124 ] && [ -n "$msg" ] && [ -z "$crash" ] && ge 10 "$secs"; then
    record "cap overrun" PASS "job ended in ${secs} s: ${msg#*error: }"
  else
    record "cap overrun" FAIL "exit $rc after ${secs} s; message: ${msg:-none}; ${crash:+crash: $crash}"
  fi
fi

# ---- all-reduce bandwidth on the GPU ----
# vgpu_allreduce_perf binds what the job binds (the GPU here, the simulated one
# in a dry run): nccl-tests' table, out of place and in place, every result
# checked, and --copy_bw's device-to-device copy on rank 0's device.
if [ "$quick" = 1 ]; then SIZES=(-b 64K -e 1M -n 3 -w 1)
elif [ "$dry" = 1 ]; then SIZES=(-b 64K -e 4M -n 5 -w 2)
else SIZES=(-b 64K -e 256M -n 20 -w 5); fi
# allreduce STEP NP [env VAR=...] -- [--set ...]: vgpu_allreduce_perf; the figure is
# the largest size's bus bandwidth (out of place, then in place) beside the
# device's copy bandwidth.
allreduce() {
  local step=$1 np=$2 envs=() sets=()
  shift 2
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  sets=("$@")
  time_left "$step" || return
  run "$L_AR" 90 "${SIM[@]}" "${envs[@]}" "$MPIRUN" -np "$np" "$PERF" "${SIZES[@]}" --copy_bw "${sets[@]}"
  local head last d2d
  head=$(grep -m1 '^# vgpu_allreduce_perf:' <<<"$out" | sed 's/^# vgpu_allreduce_perf: //; s/, op .*//')
  last=$(grep -E '^ +[0-9]+ +[0-9]+ ' <<<"$out" | tail -1)
  d2d=$(grep -m1 -oE 'copy on rank 0.s device: [0-9.]+ GB/s' <<<"$out" | grep -oE '[0-9.]+ GB/s')
  if [ "$rc" = 0 ] && grep -q '^# Out of bounds values : 0 OK$' <<<"$out" && grep -q '^OK$' <<<"$out"; then
    if [ "$gpu" = 1 ] && ! grep -q 'device cuda' <<<"$head"; then
      record "$step" FAIL "not on the GPU: $head"
    else
      record "$step" PASS "$(awk '{ printf "%d MiB: busbw %s GB/s (in place %s), %s us", $1 / 1048576, $8, $12, $6 }' <<<"$last"); d2d copy $d2d; #wrong 0; $head"
    fi
  else
    record "$step" FAIL "exit $rc: $(grep -m1 -E 'FAILED|error|vgpu_allreduce_perf:' <<<"$out" | cut -c1-200)"
  fi
}
# The ring over CUDA IPC, asked for: without MPS the ranks' contexts take
# turns and the automatic choice is staging (docs/gpu-runs/2026-11-26-h100.md).
allreduce "allreduce ring np=2" 2 VGPU_RING_STAGING=0
allreduce "allreduce staging np=2" 2 VGPU_RING_STAGING=1
allreduce "allreduce ring np=4" 4 VGPU_RING_STAGING=0
allreduce "allreduce staging np=4" 4 VGPU_RING_STAGING=1
if need_gpu "allreduce nccl np=1"; then allreduce "allreduce nccl np=1" 1 -- --set comm.backend=nccl; fi
if [ "$NCCL_CODE" -ge 23000 ]; then
  allreduce "allreduce nccl np=2 shared" 2 NCCL_MULTI_RANK_GPU_ENABLE=1 -- --set comm.backend=nccl
elif [ "$dry" = 1 ]; then
  record "allreduce nccl np=2 shared" "SKIP(dry-run: needs a GPU and NCCL >= 2.30)" ""
else
  record "allreduce nccl np=2 shared" "SKIP(NCCL ${NCCL_VER:-not found} < 2.30: no NCCL_MULTI_RANK_GPU_ENABLE)" ""
fi
# The same benchmark on the host's CPU devices, beside the GPU's.
if time_left "allreduce cpu np=2"; then
  run "$L_AR" 60 "$MPIRUN" -np 2 "$PERF" -b 64K -e "$([ "$dry" = 1 ] && echo 4M || echo 64M)" --set devices.kind=cpu
  if [ "$rc" = 0 ] && grep -q '^OK$' <<<"$out" && grep -q '^# vgpu_allreduce_perf: .*device cpu,' <<<"$out"; then
    record "allreduce cpu np=2" PASS "CPU devices (devices.kind=cpu): $(grep -m1 'Avg bus bandwidth' <<<"$out" | sed 's/^# *//')"
  else record "allreduce cpu np=2" FAIL "exit $rc: $(grep -m1 -E 'FAILED|error|vgpu_allreduce_perf:' <<<"$out" | cut -c1-200)"; fi
fi

# ---- the device collectives (issue 43): ranks that share the GPU ----
# vgpurun starts MPS where ranks share a GPU, and the ring then keeps every
# collective on it, one kernel a call (comm/devcoll/). 8 B to 256 MiB with
# every result checked: np=4 automatic beside each forced all-reduce, np=2
# automatic, and time-sliced (--no-mps, VGPU_DEVCOLL=1) beside the staged
# rows above. The figure: 8 B and 8 KiB times, 64 MiB's time and its share
# of the memory-traffic floor (2 N S bytes at the same run's copy rate),
# the algorithms taken. A dry run takes the simulated device (VGPU_DEVCOLL=1
# on the simulated GPU's CPU memory).
if [ "$quick" = 1 ]; then DSIZES=(-b 8 -e 1M -f 4 -n 3 -w 1)
elif [ "$dry" = 1 ]; then DSIZES=(-b 8 -e 4M -f 2 -n 5 -w 2)
else DSIZES=(-b 8 -e 256M -f 2 -n 20 -w 5); fi
DC_ON=(VGPU_DEVCOLL=1)
[ "$gpu" = 1 ] && DC_ON=()
# devcoll_ar STEP NP [VAR=VALUE...] [-- VGPURUN_OPTIONS...]
devcoll_ar() {
  local step=$1 np=$2 envs=() opts=()
  shift 2
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  opts=("$@")
  time_left "$step" 30 || return
  run "$L_AR" 120 "${SIM[@]}" "${DC_ON[@]}" "${envs[@]}" "$VGPURUN" "${opts[@]}" -np "$np" -- \
    "$PERF" "${DSIZES[@]}" --copy_bw
  local rows d2d algos fig
  rows=$(grep -E '^ +[0-9]+ +[0-9]+ ' <<<"$out")
  d2d=$(grep -m1 -oE 'copy on rank 0.s device: [0-9.]+ GB/s' <<<"$out" | sed 's/.*device: //; s/ GB.s//')
  algos=$(awk '{ print $14, $15 }' <<<"$rows" | sort -u | grep '^device' | paste -sd',')
  fig=$(awk -v n="$np" -v d2d="${d2d:-0}" '
    $1 == 8 || $1 == 8192 { printf "%s B %s us; ", $1, $6 }
    $1 == 67108864 { printf "64 MiB %s us (busbw %s GB/s", $6, $8
                     if (d2d > 0) printf ", %.0f%% of the floor", 100 * 2 * n * $1 / (d2d * 1e3) / $6
                     printf "); " }' <<<"$rows")
  if [ "$rc" = 0 ] && grep -q '^OK$' <<<"$out" && grep -q '^# Out of bounds values : 0 OK$' <<<"$out"; then
    if [ -z "$algos" ]; then record "$step" FAIL "not on the device collectives: $(awk '{ print $14, $15 }' <<<"$rows" | sort -u | paste -sd',')"
    else record "$step" PASS "${fig}${algos}; d2d copy ${d2d:-?} GB/s; #wrong 0"; fi
  else
    record "$step" FAIL "exit $rc: $(grep -m1 -E 'FAILED|error|vgpu_allreduce_perf:' <<<"$out" | cut -c1-200)"
  fi
}
devcoll_ar "devcoll np=4 auto" 4
devcoll_ar "devcoll np=4 oneshot" 4 VGPU_DEVCOLL_ALGO=oneshot
devcoll_ar "devcoll np=4 twoshot" 4 VGPU_DEVCOLL_ALGO=twoshot
devcoll_ar "devcoll np=2 auto" 2
if need_gpu "devcoll np=4 time-sliced"; then
  devcoll_ar "devcoll np=4 time-sliced" 4 VGPU_DEVCOLL=1 -- --no-mps
fi
# synccheck on the kernel (its barriers): 2 ranks time-sliced (compute-
# sanitizer does not follow MPS clients).
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
if need_gpu "synccheck devcoll" && time_left "synccheck devcoll" 60; then
  if [ -z "$CS" ]; then record "synccheck devcoll" FAIL "no compute-sanitizer"
  else
    run "$L_SAN" 120 env VGPU_DEVCOLL=1 "$MPIRUN" -np 2 "$CS" --tool synccheck --kernel-name kns=devcoll_kernel_ \
      --error-exitcode 99 "$PERF" -b 8 -e 1M -f 16 -n 2 -w 1 --set devices.memory_limit=1G
    errs=$(grep -oE 'ERROR SUMMARY: [0-9]+ error' <<<"$out" | awk '{ s += $3; n++ } END { print s + 0 " in " n + 0 " ranks" }')
    if [ "$rc" = 0 ] && grep -q '^OK$' <<<"$out"; then record "synccheck devcoll" PASS "devcoll_kernel_: $errs errors"
    else record "synccheck devcoll" FAIL "exit $rc, $errs: $(grep -m1 -E 'Error|error' <<<"$out" | cut -c1-160)"; fi
  fi
fi
# The ring's whole collective test (every collective, type and operation,
# send and recv, exact) with 4 ranks on the device collectives.
if time_left "devcoll comm np=4" 60; then
  run "$L_AR" 180 "${SIM[@]}" "${DC_ON[@]}" "$VGPURUN" -np 4 -- "$B/test_comm_collectives" --backend ring
  said=$(grep -m1 '^test_comm_collectives: backend' <<<"$out" | cut -c1-160)
  if [ "$rc" = 0 ] && grep -q 'device collectives.*: OK' <<<"$said"; then
    record "devcoll comm np=4" PASS "${said#test_comm_collectives: }"
  else
    record "devcoll comm np=4" FAIL "exit $rc: ${said:-$(grep -m1 -E 'error|FAILED' <<<"$out" | cut -c1-160)}"
  fi
fi
# The README's job through vgpurun at 1, 2 and 4 ranks (MPS by default):
# samples/s, and 4 ranks against 1 (the goal: >= 0.9x).
if time_left "devcoll train np=1,2,4" 60; then
  fig="" one=0 four=0 why=""
  for np in 1 2 4; do
    run "$L_TRAIN" 120 "${SIM[@]}" "${DC_ON[@]}" "$VGPURUN" -np "$np" -- "$TRAIN" "$CFG" "${DATASET[@]}" \
      --set train.max_steps=$([ "$quick" = 1 ] && echo 100 || echo 1000)
    s=$(grep 'vgpu_train: done' <<<"$out" | tail -1)
    sps=$(field samples_per_s "$s")
    [ "$(field status "$s")" = ok ] || why="$why np=$np exit $rc;"
    # (the job table wraps its lines: joined first)
    [ "$np" -gt 1 ] && ! tr -s ' \n' '  ' <<<"$out" | grep -q 'the collectives stay on it' &&
      why="$why np=$np not on the device collectives;"
    fig="$fig np=$np ${sps:-?}/s;"
    [ "$np" = 1 ] && one=${sps:-0}
    [ "$np" = 4 ] && four=${sps:-0}
  done
  ratio=$(awk -v a="$four" -v b="$one" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "?" }')
  if [ -z "$why" ]; then record "devcoll train np=1,2,4" PASS "samples/s:$fig 4 ranks / 1: ${ratio}x"
  else record "devcoll train np=1,2,4" FAIL "${why# }"; fi
fi
# A rank killed mid-collective: the job ends within 10 s naming it, the
# GPU's memory is released, nothing stays in /dev/shm.
if time_left "devcoll kill" 40; then
  ls /dev/shm >"$WORK/shm.before" 2>/dev/null
  mem0=$([ "$gpu" = 1 ] && gpu_mem_used)
  "${SIM[@]}" "${DC_ON[@]}" "$VGPURUN" -np 4 -- "$PERF" -b 16M -e 16M --iters 1000000 --warmup_iters 0 \
    --check 0 >"$WORK/dckill.out" 2>&1 &
  job=$!
  bg_pids+=("$job")
  victim=""
  for _ in $(seq 1 300); do
    grep -q '^# *(B)' "$WORK/dckill.out" && break
    sleep 0.1
  done
  sleep 1
  for p in $(procs_of "$PERF"); do
    [ "$(cat /proc/$p/comm 2>/dev/null)" = vgpu_allreduce_ ] || continue
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1' && victim=$p
  done
  why=""
  if [ -z "$victim" ]; then why="rank 1 not found: $(tail -3 "$WORK/dckill.out" | tr '\n' ' ' | cut -c1-160)"
  else
    t0=$EPOCHREALTIME
    kill -9 "$victim"
    for _ in $(seq 1 300); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
    secs=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
    kill -0 "$job" 2>/dev/null && { why="still running after 30 s;"; kill -9 "$job"; }
    cat "$WORK/dckill.out" >>"$L_FAULTS"
    ge 10 "$secs" || why="$why ended after $secs s (bound 10 s);"
    grep -q 'device collective [0-9]*: rank 1 has exited' "$WORK/dckill.out" || why="$why rank 1 not named;"
    if [ "$gpu" = 1 ]; then
      sleep 2
      apps=$(gpu_apps | grep -v nvidia-cuda-mps | paste -sd' ')
      mem1=$(gpu_mem_used)
      [ -z "$apps" ] || why="$why still in nvidia-smi: $apps;"
      ge $((mem0 + 256)) "$mem1" || why="$why GPU memory used $mem1 MiB, $mem0 before;"
    fi
    shm=$(ls /dev/shm 2>/dev/null | grep -E '^vgpu-' | grep -vxF -f "$WORK/shm.before" | paste -sd' ')
    [ -z "$shm" ] || why="$why left in /dev/shm: $shm;"
  fi
  if [ -z "$why" ]; then record "devcoll kill" PASS "ended ${secs} s after kill -9 of rank 1, named; ${mem1:+GPU memory $mem0 -> $mem1 MiB; }/dev/shm clean"
  else record "devcoll kill" FAIL "${why# }"; fi
fi

# ---- deterministic mode: the same parameters for 1, 2 and 4 ranks ----
if time_left "determinism" 40; then
  crcs="" devs=""
  for set in syn $([ "$quick" = 1 ] || echo fm); do
    for np in 1 2 4; do
      if [ "$set" = syn ]; then
        run "$L_TRAIN" 90 "${SIM[@]}" "$MPIRUN" -np $np "$TRAIN" "$SYN" --quiet --set train.max_steps=50 --set train.deterministic=true
      else
        run "$L_TRAIN" 90 "${SIM[@]}" "$MPIRUN" -np $np "$TRAIN" "$CFG" "${DATASET[@]}" --quiet --set data.train_limit=4096 \
          --set train.max_steps=50 --set train.epochs=1 --set train.deterministic=true
      fi
      s=$(grep 'vgpu_train: done' <<<"$out" | tail -1)
      crcs="$crcs $set:$np=$(field params_crc "$s")"
      devs="$devs $(field devices "$s")"
    done
  done
  echo "determinism:$crcs ($devs)" >>"$L_TRAIN"
  syn=$(tr ' ' '\n' <<<"$crcs" | grep '^syn:' | cut -d= -f2 | sort -u)
  fm=$(tr ' ' '\n' <<<"$crcs" | grep '^fm:' | cut -d= -f2 | sort -u)
  [ "$quick" = 1 ] && fm="not run (quick)"
  if [ "$(wc -l <<<"$syn")" = 1 ] && [ -n "$syn" ] && [ "$(wc -l <<<"$fm")" = 1 ] && [ -n "$fm" ]; then
    record "determinism np=1,2,4" PASS "params_crc $syn (synthetic), $fm (Fashion-MNIST subset); devices$(tr ' ' '\n' <<<"$devs" | sort -u | paste -sd' ')"
  else
    record "determinism np=1,2,4" FAIL "params_crc:$crcs"
  fi
fi

# ---- a rank killed with kill -9 mid-run ----
if time_left "kill -9 a rank" 60; then
  ck=$WORK/dead
  ls /dev/shm >"$WORK/shm.before" 2>/dev/null
  mem0=$([ "$gpu" = 1 ] && gpu_mem_used)
  "${SIM[@]}" "$MPIRUN" -np 4 "$TRAIN" "$SYN" --quiet --set train.epochs=100000 --set checkpoint.every_steps=20 \
    --set "checkpoint.dir=$ck" >"$WORK/dead.out" 2>&1 &
  job=$!
  bg_pids+=("$job")
  deadline=$((SECONDS + 40))
  while [ "$SECONDS" -lt "$deadline" ] && kill -0 "$job" 2>/dev/null &&
        [ "$(ls "$ck" 2>/dev/null | grep -c '^ckpt-[0-9]*\.bin$')" -lt 2 ]; do sleep 0.1; done
  victim=""
  for p in $(procs_of "$ck"); do
    [ "$(cat /proc/$p/comm 2>/dev/null)" = vgpu_train ] || continue
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=2' && victim=$p
  done
  memrun=$([ "$gpu" = 1 ] && gpu_mem_used)
  jobpids=$(procs_of "$ck" | paste -sd' ')
  why="" t_mark=$EPOCHREALTIME
  if [ -z "$victim" ]; then
    why="rank 2 not found (checkpoints: $(ls "$ck" 2>/dev/null | paste -sd' '));"
  else
    kill -9 "$victim"
  fi
  deadline=$((SECONDS + 30))
  while kill -0 "$job" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.05; done
  if kill -0 "$job" 2>/dev/null; then
    for p in $(procs_of "$ck"); do kill -9 "$p" 2>/dev/null; done
    kill -9 "$job" 2>/dev/null
    why="$why the job outlived 30 s;"
  fi
  wait "$job" 2>/dev/null
  jrc=$?
  secs=$(awk -v a="$t_mark" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  out=$(cat "$WORK/dead.out")
  { printf '\n$ kill -9 rank 2 (pid %s) of: mpirun.sh -np 4 vgpu_train synthetic_small.ini (checkpoints in %s)\n' "$victim" "$ck"
    echo "$out"; echo "[exit $jrc $secs s after the kill; GPU memory used before the job ${mem0:-?} MiB, during ${memrun:-?} MiB]"; } >>"$L_FAULTS"
  [ -z "$victim" ] || { [ "$jrc" != 0 ] || why="$why exit 0;"; ge 10 "$secs" || why="$why took ${secs} s > 10 s;"; }
  grep -qE 'rank was killed by signal 9|rank 2' <<<"$out" || why="$why the output does not name rank 2 or signal 9;"
  verdict=$(grep -m1 -oE 'flight recorder: (collective|every rank) .*' <<<"$out")
  grep -q 'rank 2' <<<"$verdict" || why="$why no flight-recorder verdict naming rank 2;"
  sleep 1
  left=""
  for i in $(seq 30); do left=$(procs_of "$ck"); [ -z "$left" ] && break; sleep 0.1; done
  [ -z "$left" ] || why="$why processes left: $left;"
  memfig=""
  if [ "$gpu" = 1 ]; then
    for i in $(seq 50); do
      apps=$(gpu_apps | awk -F', *' '{ print $1 }' | grep -xF -f <(tr ' ' '\n' <<<"$jobpids") || true)
      mem1=$(gpu_mem_used)
      [ -z "$apps" ] && ge $((mem0 + 256)) "$mem1" && break
      sleep 0.1
    done
    echo "after: GPU memory used $mem1 MiB; the job's processes in nvidia-smi: ${apps:-none}" >>"$L_FAULTS"
    [ -z "$apps" ] || why="$why still in nvidia-smi: $apps;"
    ge $((mem0 + 256)) "$mem1" || why="$why GPU memory used $mem1 MiB, $mem0 before;"
    memfig=", GPU memory ${memrun} -> ${mem1} MiB (${mem0} before)"
  fi
  shm=""
  for f in $(ls /dev/shm 2>/dev/null | grep -E '^(vgpu-|vader_segment\.)' | grep -vxF -f "$WORK/shm.before"); do
    grep -qsF "/dev/shm/$f" /proc/[0-9]*/maps || shm="$shm $f"
  done
  [ -z "$shm" ] || why="$why left in /dev/shm:$shm;"
  newest=$(ls "$ck" 2>/dev/null | grep '^ckpt-[0-9]*\.bin$' | sort | tail -1)
  if [ -n "$newest" ]; then
    step=$(sed 's/^ckpt-0*//; s/\.bin$//' <<<"$newest")
    run "$L_FAULTS" 60 "${SIM[@]}" "$MPIRUN" -np 2 "$TRAIN" "$SYN" --quiet --set train.epochs=100000 \
      --set "train.max_steps=$((step + 10))" --resume "$ck/$newest"
    grep -q 'status=ok' <<<"$out" || why="$why resuming $newest: exit $rc;"
  else
    why="$why no checkpoint to resume;"
  fi
  if [ -z "$why" ]; then record "kill -9 a rank" PASS "ended in ${secs} s, ${verdict#flight recorder: }$memfig, /dev/shm clean, $newest resumed"
  else why=${why%;}; record "kill -9 a rank" FAIL "${why# }"; fi
fi

# ---- compute-sanitizer (CS: found above, at the device collectives) ----
if need_gpu "memcheck np=2" && time_left "memcheck np=2" 60; then
  if [ -z "$CS" ]; then record "memcheck np=2" FAIL "no compute-sanitizer"
  else
    run "$L_SAN" 200 "$MPIRUN" -np 2 "$CS" --tool memcheck --error-exitcode 99 "$TRAIN" "$CFG" "${DATASET[@]}" \
      --quiet --set train.max_steps=20 --set devices.memory_limit=2G
    errs=$(grep -oE 'ERROR SUMMARY: [0-9]+ error' <<<"$out" | awk '{ s += $3; n++ } END { print s + 0 " errors in " n + 0 " ranks" }')
    if [ "$rc" = 0 ] && [ "$errs" = "0 errors in 2 ranks" ] && grep -q 'status=ok' <<<"$out"; then
      record "memcheck np=2" PASS "$errs, 20 steps, ${secs} s"
    else record "memcheck np=2" FAIL "exit $rc, $errs: $(grep -m1 -E '=========  *(Invalid|Program hit|Error)' <<<"$out" | cut -c1-160)"; fi
  fi
fi
if need_gpu "racecheck ring" && time_left "racecheck ring" 90; then
  if [ -z "$CS" ]; then record "racecheck ring" FAIL "no compute-sanitizer"
  else
    run "$L_SAN" 120 "$MPIRUN" -np 2 "$CS" --tool racecheck --kernel-name kns=ring_reduce --error-exitcode 99 \
      "$PERF" -b 64K -e 1M -f 4 -n 2 -w 1 --set devices.memory_limit=1G
    errs=$(grep -oE 'RACECHECK SUMMARY: [0-9]+ hazard|ERROR SUMMARY: [0-9]+ error' <<<"$out" | awk '{ s += $3; n++ } END { print s + 0 " in " n + 0 " ranks" }')
    if [ "$rc" = 0 ] && grep -q '^OK$' <<<"$out"; then record "racecheck ring" PASS "ring_reduce kernels: $errs hazards/errors"
    else record "racecheck ring" FAIL "exit $rc, $errs: $(grep -m1 -E 'Error|error' <<<"$out" | cut -c1-160)"; fi
  fi
fi

# ---- MPS ----
if command -v nvidia-cuda-mps-control >/dev/null; then
  if need_gpu "mps np=4" && time_left "mps np=4" 60; then
    run "$L_TRAIN" 150 "$VGPURUN" --mps --mem-per-rank 4G -np 4 -- "$TRAIN" "$CFG" "${DATASET[@]}" --set train.max_steps=500
    s=$(grep 'vgpu_train: done' <<<"$out" | tail -1)
    if [ "$rc" = 0 ] && grep -q '^vgpu: MPS:' <<<"$out" && [ "$(field status "$s")" = ok ]; then
      record "mps np=4" PASS "$(grep -m1 '^vgpu: MPS:' <<<"$out" | cut -c7-), wall $(field wall_s "$s") s"
    else record "mps np=4" FAIL "exit $rc: $(grep -m1 -iE 'mps|error' <<<"$out" | cut -c1-160)"; fi
  fi
elif [ "$dry" = 1 ]; then
  record "mps np=4" "SKIP(dry-run: needs a GPU; no nvidia-cuda-mps-control here)" ""
else
  record "mps np=4" "SKIP(no nvidia-cuda-mps-control on this machine)" ""
fi

# ---- PyTorch DDP under vgpurun, 4 ranks on the one GPU ----
torch_ok=0
python3 -c 'import torch' 2>/dev/null && torch_ok=1
for backend in gloo nccl; do
  st="ddp $backend np=4"
  need_gpu "$st" || continue
  [ "$torch_ok" = 1 ] || { record "$st" FAIL "python3 has no torch"; continue; }
  time_left "$st" 60 || continue
  run "$L_PT" 180 env NCCL_DEBUG=WARN OMP_NUM_THREADS=1 "$VGPURUN" -np 4 -- "$(command -v python3)" \
    "$repo/scripts/gpu/ddp_gpu.py" "$backend"
  oks=$(grep -cE "^ddp_gpu: $backend rank [0-3] of 4 .* ok$" <<<"$out")
  if [ "$oks" = 4 ]; then
    record "$st" PASS "4 ranks on one GPU: all_reduce and 2 DDP steps agree$(grep -m1 -oE 'libnccl=[^ ]+' <<<"$out" | sed 's/^/; /')"
  elif [ "$backend" = nccl ]; then
    # The step's purpose: the exact message a user gets.
    msg=$(grep -m1 -E 'NCCL WARN' <<<"$out" | sed 's/^.*NCCL WARN //')
    exc=$(grep -m1 -E '^ddp_gpu: nccl rank [0-3] .* failed: ' <<<"$out" | sed 's/^.* failed: //' | cut -c1-300)
    if [ -n "$msg$exc" ]; then record "$st" PASS "NCCL refused (recorded): ${msg:+NCCL WARN $msg; }$exc"
    else record "$st" FAIL "exit $rc, no ddp_gpu line and no NCCL message"; fi
  else
    record "$st" FAIL "$oks of 4 ranks ok: $(grep -m1 'ddp_gpu:.*\(FAILED\|failed\)' <<<"$out" | cut -c1-200)"
  fi
done

# ---- vgpu's NCCL (issue 44): NCCL programs with 4 ranks on the one GPU ----
# vgpurun puts build/vnccl/libnccl.so.2 first where ranks share a GPU (and
# starts MPS). The MPI+NCCL example, vgpu_nccl_perf beside vgpu's own
# all-reduce above, PyTorch's all_reduce from 1 to 256 MiB, and FSDP's
# all-gathers and reduce-scatters; each names the libnccl it loaded. A dry
# run runs the first two on the simulated GPU (vgpurun adds the simulated
# CUDA runtime there).
NCCL_EX=$B/vgpu_example_nccl_allreduce NCCL_PERF=$B/vgpu_nccl_perf
if [ ! -x "$NCCL_EX" ] || [ ! -e "$B/vnccl/libnccl.so.2" ]; then
  record "vnccl example np=4" FAIL "not built: $NCCL_EX, $B/vnccl/libnccl.so.2 (VGPU_HAVE_NCCL off?)"
elif time_left "vnccl example np=4" 30; then
  run "$L_PT" 60 "${SIM[@]}" "$VGPURUN" -np 4 -- "$NCCL_EX"
  if [ "$rc" = 0 ] && grep -q '^nccl_allreduce: 4 ranks, 1048576 floats: ok$' <<<"$out"; then
    record "vnccl example np=4" PASS "an MPI+NCCL program, 4 ranks on one GPU: exact, ${secs} s"
  else record "vnccl example np=4" FAIL "exit $rc: $(grep -m1 -E 'nccl_allreduce|vgpu-nccl|error' <<<"$out" | cut -c1-200)"; fi
fi
if [ -x "$NCCL_PERF" ] && time_left "vnccl perf np=4" 60; then
  if [ "$dry" = 1 ]; then PSIZES=(-b 64K -e 4M -f 4 -n 5 -w 2); else PSIZES=(-b 1M -e 256M -f 4 -n 10 -w 3); fi
  run "$L_AR" 120 "${SIM[@]}" NCCL_DEBUG=INFO "$VGPURUN" -np 4 -- "$NCCL_PERF" "${PSIZES[@]}"
  # (the path: the device collectives say so at NCCL_DEBUG=INFO; else the stages)
  path=$(grep -q 'collectives on it' <<<"$out" && echo "device collectives" || echo "staged")
  if [ "$rc" = 0 ] && grep -q '^# every result checked: ok$' <<<"$out"; then
    record "vnccl perf np=4" PASS "$(grep -E '^ +[0-9]+ ' <<<"$out" | awk '$1 == 67108864 || $1 == 268435456 || $1 == 4194304 { printf "%d MiB %s us busbw %s GB/s; ", $1 / 1048576, $3, $5 }')#wrong 0; $path"
  else record "vnccl perf np=4" FAIL "exit $rc: $(grep -m1 -E 'vgpu_nccl_perf|vgpu-nccl|WRONG' <<<"$out" | cut -c1-200)"; fi
fi
if need_gpu "torch all_reduce nccl np=4" && [ "$torch_ok" = 1 ] && time_left "torch all_reduce nccl np=4" 60; then
  run "$L_PT" 150 env OMP_NUM_THREADS=1 "$VGPURUN" -np 4 -- "$(command -v python3)" \
    "$repo/scripts/gpu/torch_allreduce.py" nccl cuda
  oks=$(grep -cE '^torch_allreduce: rank [0-3] libnccl=.*vnccl.* ok$' <<<"$out")
  if [ "$oks" = 4 ]; then
    record "torch all_reduce nccl np=4" PASS "vgpu's NCCL on 4 ranks: $(grep -E '^torch_allreduce: nccl 4 ranks (1|64|256) MiB' <<<"$out" | sed 's/^torch_allreduce: nccl 4 ranks //; s/, algbw [^,]*//' | paste -sd';')"
  else record "torch all_reduce nccl np=4" FAIL "$oks of 4 ranks ok on vgpu's NCCL: $(grep -m1 -E 'WRONG|Error|error|libnccl=' <<<"$out" | cut -c1-200)"; fi
fi
if need_gpu "fsdp nccl np=4" && [ "$torch_ok" = 1 ] && time_left "fsdp nccl np=4" 60; then
  run "$L_PT" 150 env OMP_NUM_THREADS=1 "$VGPURUN" -np 4 -- "$(command -v python3)" \
    "$repo/scripts/gpu/fsdp_gpu.py" nccl
  oks=$(grep -cE '^fsdp_gpu: nccl rank [0-3] of 4: matches_single_process=True .*libnccl=.*vnccl.* ok$' <<<"$out")
  if [ "$oks" = 4 ]; then record "fsdp nccl np=4" PASS "3 FSDP steps on vgpu's NCCL equal one process's: $(grep -m1 -oE 'max_abs_diff=[^ ]+' <<<"$out")"
  else record "fsdp nccl np=4" FAIL "$oks of 4 ranks ok: $(grep -m1 -E 'fsdp_gpu: .*(FAILED|failed)' <<<"$out" | cut -c1-220)"; fi
fi

# ---- probes for unmodified PyTorch jobs with N ranks on one GPU ----
if need_gpu "probe: UUID twice" && time_left "probe: UUID twice"; then
  count_py='import ctypes
cu = ctypes.CDLL("libcuda.so.1"); n = ctypes.c_int(-1)
r = cu.cuInit(0); r2 = cu.cuDeviceGetCount(ctypes.byref(n)) if r == 0 else -1
print("cuInit", r, "cuDeviceGetCount", r2, "count", n.value)'
  fig=""
  for cvd in "$GPU_UUID,$GPU_UUID" "0,0"; do
    run "$L_PT" 30 env CUDA_VISIBLE_DEVICES="$cvd" python3 -c "$count_py"
    fig="$fig CUDA_VISIBLE_DEVICES=$cvd: $(tail -1 <<<"$out");"
  done
  if [ "$torch_ok" = 1 ]; then
    run "$L_PT" 60 env CUDA_VISIBLE_DEVICES="$GPU_UUID,$GPU_UUID" python3 -c 'import torch; print("torch.cuda.device_count()", torch.cuda.device_count())'
    fig="$fig $(tail -1 <<<"$out")"
  fi
  record "probe: UUID twice" PASS "${fig# }"
fi
if need_gpu "probe: torch's NCCL" && time_left "probe: torch's NCCL"; then
  if [ "$torch_ok" = 1 ]; then
    tdir=$(python3 -c 'import torch, os; print(os.path.dirname(torch.__file__))' 2>/dev/null)
    lib=$(ls "$tdir"/lib/libtorch_cuda.so 2>/dev/null)
    run "$L_PT" 30 sh -c "nm -D --undefined-only '$lib' | grep -i ' nccl'; echo '--- ldd'; ldd '$lib' | grep -i nccl"
    syms=$(grep -ciE ' U nccl' <<<"$out")
    # The names, for vgpu's NCCL's export test (docs/gpu-runs/README.md: A record).
    grep -oE ' U nccl[A-Za-z0-9_]*' <<<"$out" | awk '{ print "torch_nccl_import: " $2 }' | sort -u >>"$L_PT"
    run "$L_PT" 60 python3 -c 'import torch
print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())
print("".join(sorted(set(l.split()[-1] + "\n" for l in open("/proc/self/maps") if "nccl" in l.lower()))))'
    from=$(grep -m1 -E '/libnccl' <<<"$out")
    if [ -n "$lib" ]; then record "probe: torch's NCCL" PASS "libtorch_cuda.so imports $syms nccl symbols; $(head -1 <<<"$out"); loads ${from:-?}"
    else record "probe: torch's NCCL" FAIL "no libtorch_cuda.so under $tdir"; fi
  else record "probe: torch's NCCL" FAIL "python3 has no torch"; fi
fi

# ---- the table ----
fails=0
{
  echo "vgpu GPU check ($([ "$dry" = 1 ] && echo 'dry run, no GPU' || echo 'GPU run')): $(head -1 "$L_FACTS" | sed 's/^check.sh //'), $(date -u +%Y-%m-%dT%H:%M:%SZ), $((SECONDS - T0)) s"
  echo "machine: $(uname -m), $(nproc) cpus,$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), kernel $(uname -r)${g_name:+; GPU$g_name, driver$g_drv}"
  printf '%-28s %-44s %s\n' step result "key figure"
  for i in "${!T_STEP[@]}"; do
    printf '%-28s %-44s %s\n' "${T_STEP[$i]}" "${T_RES[$i]}" "${T_FIG[$i]}"
    [ "${T_RES[$i]}" = FAIL ] && fails=$((fails + 1))
  done
  echo "$fails failed, ${#T_STEP[@]} steps; logs in $outdir"
} >"$SUMMARY"
# Only 8 files of at most 16 MiB come back: cut each log to 15 MiB (head and tail kept).
for f in "$outdir"/*; do
  [ "$(stat -c %s "$f")" -gt $((15 << 20)) ] || continue
  { head -c $((7 << 20)) "$f"; printf '\n[... cut by check.sh ...]\n'; tail -c $((7 << 20)) "$f"; } >"$f.cut" && mv "$f.cut" "$f"
done
echo
cat "$SUMMARY"
[ "$fails" = 0 ]
