#!/usr/bin/env bash
# bench_nccl.sh: vgpu's NCCL (launcher/vnccl/) beside libvgpu's own ring on
# this machine: an NCCL program (vgpu_nccl_perf: MPI, nccl.h and CUDA's
# runtime alone) on simulated GPUs, where vgpurun puts vgpu's NCCL and the
# simulated CUDA runtime first, and vgpu_allreduce_perf (libvgpu's ring, its
# automatic algorithm) on CPU devices, the same float sums, the ranks sharing
# one simulated GPU. Rounds alternate the two; each cell is the median of the
# rounds' times.
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: scripts/bench_nccl.sh [--ranks "N..."] [--sizes "BYTES..."] [--iters N] [--repeat R]
Prints, per rank count and size: us a call through vgpu's NCCL, through
libvgpu's ring, and their ratio. Ends with OK, or FAILED (exit 1) when a run
failed or a result was wrong.
  --ranks "N..."     rank counts (default "2 4")
  --sizes "BYTES..." sizes in bytes (default "8 65536 1048576 16777216")
  --iters N          timed calls a size and run (default 50)
  --repeat R         rounds (default 3)
Env: VGPU_BUILD_DIR (default build).
USAGE
}

die() { echo "bench_nccl: $*" >&2; echo "FAILED"; exit 1; }
here=$(cd "$(dirname "$0")/.." && pwd)
build=${VGPU_BUILD_DIR:-$here/build}
ranks="2 4" sizes="8 65536 1048576 16777216" iters=50 repeat=3
while [ $# -gt 0 ]; do
  case $1 in
    --ranks) ranks=${2:?}; shift 2 ;;
    --sizes) sizes=${2:?}; shift 2 ;;
    --iters) iters=${2:?}; shift 2 ;;
    --repeat) repeat=${2:?}; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "bench_nccl: unknown argument $1 (scripts/bench_nccl.sh --help)" >&2; exit 2 ;;
  esac
done
for f in vgpurun vgpu_nccl_perf vgpu_allreduce_perf vnccl/libnccl.so.2; do
  [ -e "$build/$f" ] || die "$build/$f is missing (vgpu's NCCL needs nccl.h at build time)"
done

# time_of OUTPUT BYTES: the time column of the row for BYTES.
time_of() { awk -v b="$2" '$1 == b && $2 ~ /^[0-9]+$/ { print $3; exit }' <<<"$1"; }
declare -A got
for r in $(seq "$repeat"); do
  for n in $ranks; do
    for s in $sizes; do
      for tool in nccl ring; do
        if [ $(( (r + n) % 2 )) = 1 ]; then [ $tool = nccl ] && tool=ring || tool=nccl; fi
        if [ $tool = nccl ]; then
          out=$(VGPU_SIM_GPUS=1x80G timeout 300 "$build/vgpurun" -np "$n" -- "$build/vgpu_nccl_perf" \
                -b "$s" -e "$s" -n "$iters" -w 5) || die "vgpu_nccl_perf -np $n -b $s failed: $out"
          grep -q 'every result checked: ok' <<<"$out" || die "vgpu_nccl_perf: wrong results"
          t=$(time_of "$out" "$s")
        else
          out=$(timeout 300 "$build/vgpurun" -np "$n" -- "$build/vgpu_allreduce_perf" \
                -b "$s" -e "$s" -n "$iters" -w 5) || die "vgpu_allreduce_perf -np $n -b $s failed: $out"
          grep -q '^OK' <<<"$out" || die "vgpu_allreduce_perf: wrong results"
          t=$(awk -v b="$s" '$1 == b { print $6; exit }' <<<"$out")
        fi
        [ -n "$t" ] || die "no row for $s bytes in: $out"
        got[$tool,$n,$s]="${got[$tool,$n,$s]:-} $t"
      done
    done
  done
done
median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores; median of $repeat rounds, $iters calls each"
printf '%6s %10s %14s %14s %8s\n' ranks bytes "vgpu-nccl us" "ring us" "ratio"
for n in $ranks; do
  for s in $sizes; do
    a=$(median "${got[nccl,$n,$s]}") b=$(median "${got[ring,$n,$s]}")
    printf '%6s %10s %14.1f %14.1f %7.2fx\n' "$n" "$s" "$a" "$b" "$(echo "$a / $b" | bc -l)"
  done
done
echo OK
