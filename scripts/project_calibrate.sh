#!/bin/sh
# project_calibrate.sh: this machine as a target file, for vgpu-project's
# --measured-on (docs/PROJECTION.md#calibrating-once-on-this-machine):
# [device] from the trainer's GEMMs as one rank runs them (vgpu_gemm_perf,
# one thread) and this machine's memory copy rate, [intra] from a 2-rank
# ring all-reduce over shared memory (vgpu_allreduce_perf): t(S) = 2 alpha +
# S / B, alpha from the smallest size, B from the two largest; the lanes'
# facts from vgpu_device_probe.
set -eu
usage() {
  cat <<'USAGE'
usage: scripts/project_calibrate.sh [OUT.ini]   (default: $VGPU_BUILD_DIR/calibration.ini)
Measures this machine (about 10 s; two ranks) and writes it as a target file for
build/vgpu-project --measured-on OUT.ini. VGPU_BUILD_DIR: the build (default build).
USAGE
}
case "${1:-}" in -h|--help) usage; exit 0 ;; -*) usage >&2; exit 2 ;; esac
here=$(cd "$(dirname "$0")/.." && pwd)
build=${VGPU_BUILD_DIR:-$here/build}
out=${1:-$build/calibration.ini}
for p in vgpu_gemm_perf vgpu_allreduce_perf vgpu-project vgpu_device_probe; do
  [ -x "$build/$p" ] || { echo "project_calibrate: $build/$p is not built (make $p)" >&2; exit 2; }
done

# The trainer's GEMMs, one thread as each rank runs them: the best batch's
# time-weighted rate (GFLOP/s).
gflops=$("$build/vgpu_gemm_perf" -l device -n 3 -m 10 |
  awk '/all \(time-weighted\)/ { if ($NF > best) best = $NF } END { if (best > 0) print best }')
[ -n "$gflops" ] || { echo "project_calibrate: vgpu_gemm_perf gave no rate" >&2; exit 1; }
mem=$("$build/vgpu-project" --measure-memory | awk '{ print $3 }')
# The lanes' facts (docs/PROJECTION.md, "The lanes"): a tiny operation's
# call, the shortest operation, a wait, the host-to-device copy rate.
probe=$("$build/vgpu_device_probe") || { echo "project_calibrate: vgpu_device_probe failed" >&2; exit 1; }

# The ring over shared memory, 2 ranks, the ring algorithm forced (the model's).
# On a busy machine a size's mean can take a preempted rank's pause, so that
# the largest size reads no slower than the one before: measured again then,
# up to three times.
fit=""
for _ in 1 2 3; do
  table=$(VGPU_RING_ALGO=ring "$here/scripts/mpirun.sh" -np 2 "$build/vgpu_allreduce_perf" \
            -b 8 -e 4M -f 4 -n 20 -w 5 -c 0 2>&1) ||
    { printf '%s\n' "$table" >&2; echo "project_calibrate: vgpu_allreduce_perf failed" >&2; exit 1; }
  fit=$(printf '%s\n' "$table" |
    awk '$1 ~ /^[0-9]+$/ && NF >= 13 { n++; if (n == 1) small = $6 * 1e-6; s1 = s2; t1 = t2; s2 = $1; t2 = $6 * 1e-6 }
         END {
           if (n < 3 || t2 <= t1) exit 1
           # alpha: half the smallest size'"'"'s time (its bytes are nothing);
           # B: the slope between the two largest sizes (their alphas cancel).
           printf "%.2f %.3f\n", small / 2 * 1e6, 8 * (s2 - s1) / (t2 - t1) / 1e9
         }') && break
  fit=""
done
[ -n "$fit" ] || { printf '%s\n' "$table" >&2
  echo "project_calibrate: could not fit the all-reduce times (3 tries: the largest size was not the slowest)" >&2; exit 1; }
alpha=${fit% *}
gbit=${fit#* }
cpu=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || true)

mkdir -p "$(dirname "$out")"
tmp="$out.tmp.$$"
cat >"$tmp" <<INI
; $(basename "$out"): this machine, measured by scripts/project_calibrate.sh on $(date -u +%Y-%m-%d)
; (${cpu:-CPU}, $(nproc) cores): vgpu-project --measured-on $(basename "$out")
[target]
name = this machine ($(hostname))
hosts = 1
gpus_per_host = 2

[device]
name = ${cpu:-CPU} (one rank, one thread)
; vgpu_gemm_perf -l device: the trainer's GEMMs, $gflops GFLOP/s
fp32_tflops = $(awk -v g="$gflops" 'BEGIN { printf "%.6f", g / 1000 }')
; vgpu-project --measure-memory: memcpy, read + write
memory_gbyte_per_s = $mem
$probe

[intra]
link = shared memory (vgpu ring)
; VGPU_RING_ALGO=ring vgpu_allreduce_perf -np 2, 8 B to 4 MiB, t = 2 alpha + S / B:
; alpha from 8 B, B from the two largest sizes
latency_us = $alpha
gbit_per_s = $gbit
INI
mv "$tmp" "$out"
launch=$(printf '%s\n' "$probe" | awk '$1 == "launch_us" { print $3 }')
echo "project_calibrate: $out: ${gflops} GFLOP/s, memory $mem GB/s, ${launch} us an operation's call, shared memory alpha ${alpha} us, ${gbit} Gbit/s"
