#!/usr/bin/env bash
# bench_train.sh: training throughput (samples/s) for np = 1, 2, 4 with the
# same config and global batch, measured one after the other in one run.
# Usage: scripts/bench_train.sh [CONFIG.ini] [extra vgpu_train args...]
# Default: Fashion-MNIST, MLP 784-256-128-10, global batch 256, one epoch,
# devices.cpu_threads=1.
# Env: VGPU_BUILD_DIR (default build), VGPU_BENCH_NPS ("1 2 4"),
#      VGPU_BENCH_REPEAT (runs per cell, default 1; the median is printed,
#      and with more than one run the median of paired ratios too),
#      VGPU_BENCH_TORCH=1: also run the PyTorch DDP reference (gloo, 1 thread
#      per rank, same model, optimizer and global batch) for each np, in the
#      same interleaved order, and print the ratio. The reference alone:
#      /usr/bin/python3 scripts/bench_pytorch_ddp.py --nps 1,2,4
#      (needs python3-torch; apt-get install python3-torch).
#      VGPU_BENCH_DET=0: leave out the deterministic-mode column (on by
#      default: train.deterministic=true, same config; its params_crc is the
#      same for every np).
#      VGPU_BENCH_BALANCE=0: leave out the train.balance=dynamic column (on by
#      default, np > 1: the split follows each rank's measured speed).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${VGPU_BUILD_DIR:-build}
[ -x "$build/vgpu_train" ] || VGPU_BUILD_DIR=$build scripts/setup.sh
cfg=${1:-configs/default.ini}
shift || true
common=(--quiet --set train.epochs=1 --set train.batch_size=256 --set model.hidden=256,128
        --set devices.cpu_threads=1 "$@")
nps=(${VGPU_BENCH_NPS:-1 2 4})
repeat=${VGPU_BENCH_REPEAT:-1}
torch=${VGPU_BENCH_TORCH:-0}
det=${VGPU_BENCH_DET:-1}
bal=${VGPU_BENCH_BALANCE:-1}
echo "# bench_train: $cfg ${common[*]}"
echo "# host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
gemm=$("$build/vgpu_gemm_perf" --libs device --batch 1 --trials 1 --min-ms 1 2>/dev/null |
       sed -n 's/^# device  : math_gemm of this build: //p') || true
echo "# GEMM: ${gemm:-unknown (no vgpu_gemm_perf)}; OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE-<unset>};" \
     "median of $repeat run(s) per cell"

# train_run WHAT NP [ARGS...]: one vgpu_train run; sets $line (its summary)
# and $sps, or stops the benchmark naming WHAT.
train_run() {
  local what=$1 n=$2
  shift 2
  line=$(scripts/mpirun.sh -np "$n" "$build/vgpu_train" "$cfg" "${common[@]}" "$@" | tail -1)
  sps=$(grep -oE 'samples_per_s=[0-9.]+' <<<"$line" | cut -d= -f2)
  [ -n "$sps" ] || { echo "np=$n${what:+ $what} failed: $line" >&2; exit 1; }
}

declare -A ours acc theirs dets dcrc dyns
for ((r = 0; r < repeat; r++)); do
  for np in "${nps[@]}"; do
    train_run "" "$np"
    ours[$np]+="$sps "
    acc[$np]=$(grep -oE 'test_acc=[0-9.]+' <<<"$line" | cut -d= -f2)
    if [ "$bal" = 1 ] && [ "$np" -gt 1 ]; then
      train_run "dynamic balance" "$np" --set train.balance=dynamic
      dyns[$np]+="$sps "
    fi
    if [ "$det" = 1 ]; then
      train_run deterministic "$np" --set train.deterministic=true
      dets[$np]+="$sps "
      dcrc[$np]=$(grep -oE 'params_crc=[0-9a-f]+' <<<"$line" | cut -d= -f2)
    fi
    if [ "$torch" = 1 ]; then
      t=$(/usr/bin/python3 scripts/bench_pytorch_ddp.py --nps "$np" | awk '!/^#/ && $1 ~ /^[0-9]+$/ { print $2 }')
      [ -n "$t" ] || { echo "PyTorch np=$np failed" >&2; exit 1; }
      theirs[$np]+="$t "
    fi
  done
done

median() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
printf '%4s %14s %12s %10s' np samples_per_s vs_np1 test_acc
[ "$bal" = 1 ] && printf ' %12s %10s' dynamic_per_s dyn_vs_np1
[ "$det" = 1 ] && printf ' %12s %10s %9s' det_per_s det/ring det_crc
[ "$torch" = 1 ] && printf ' %14s %10s' torch_per_s vs_torch
printf '\n'
base=
for np in "${nps[@]}"; do
  sps=$(median "${ours[$np]}")
  base=${base:-$sps}
  printf '%4d %14.0f %11.2fx %10s' "$np" "$sps" "$(echo "$sps / $base" | bc -l)" "${acc[$np]}"
  if [ "$bal" = 1 ] && [ -z "${dyns[$np]:-}" ]; then # np=1: nothing to balance, not run
    printf ' %12s %10s' - -
  elif [ "$bal" = 1 ]; then
    d=$(median "${dyns[$np]}")
    printf ' %12.0f %9.2fx' "$d" "$(echo "$d / $base" | bc -l)"
  fi
  if [ "$det" = 1 ]; then
    d=$(median "${dets[$np]}")
    printf ' %12.0f %9.2fx %9s' "$d" "$(echo "$d / $sps" | bc -l)" "${dcrc[$np]}"
  fi
  if [ "$torch" = 1 ]; then
    t=$(median "${theirs[$np]}")
    printf ' %14.0f %9.2fx' "$t" "$(echo "$sps / $t" | bc -l)"
  fi
  printf '\n'
done
# Paired ratios: run r against run r of the other cell, which ran seconds
# apart, then the median over r. Less swayed by the machine's slow drifts
# than a ratio of medians taken minutes apart.
pair_median() {
  paste -d' ' <(tr ' ' '\n' <<<"$1" | grep .) <(tr ' ' '\n' <<<"$2" | grep .) |
    awk '{ print $1 / $2 }' | sort -g | awk '{ v[NR] = $1 } END { printf "%.2fx", v[int((NR + 1) / 2)] }'
}
if [ "$repeat" -gt 1 ]; then
  for np in "${nps[@]}"; do
    parts=()
    [ "$np" != "${nps[0]}" ] && parts+=("vs np=${nps[0]} $(pair_median "${ours[$np]}" "${ours[${nps[0]}]}")")
    [ -n "${dyns[$np]:-}" ] && parts+=("dynamic vs np=${nps[0]} $(pair_median "${dyns[$np]}" "${ours[${nps[0]}]}")")
    [ "$torch" = 1 ] && parts+=("vs torch $(pair_median "${ours[$np]}" "${theirs[$np]}")")
    [ ${#parts[@]} -gt 0 ] && (IFS=';'; echo "# paired medians np=$np: ${parts[*]}" | sed 's/;/; /g')
  done
fi
for np in "${nps[@]}"; do # every run, for judging the noise on a shared machine
  echo "# np=$np runs: ${ours[$np]}${dyns[$np]:+(dynamic: ${dyns[$np]% }) }${dets[$np]:+(deterministic: ${dets[$np]% }) }${theirs[$np]:+(torch: ${theirs[$np]% })}"
done
