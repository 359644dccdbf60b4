#!/usr/bin/env bash
# bench_trace.sh: what --trace costs. The same training with and without
# --trace, in pairs run back to back (the order alternating), in one run; the
# step time of each (ms per step, from samples_per_s and the global batch)
# and the median of the pairs' ratios.
# Usage: scripts/bench_trace.sh [CONFIG.ini] [extra vgpu_train args...]
# Default: configs/default.ini, 4 ranks, 3 epochs, devices.cpu_threads=1.
# Env: VGPU_BUILD_DIR (default build), VGPU_BENCH_NP (4),
#      VGPU_BENCH_REPEAT (pairs, default 5),
#      VGPU_BENCH_BASELINE=DIR: also run DIR/vgpu_train (another build, e.g.
#      one from before the trace existed) without --trace in each round: what
#      the trace's hooks cost when off.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${VGPU_BUILD_DIR:-build}
[ -x "$build/vgpu_train" ] || VGPU_BUILD_DIR=$build scripts/setup.sh
cfg=${1:-configs/default.ini}
shift || true
np=${VGPU_BENCH_NP:-4}
repeat=${VGPU_BENCH_REPEAT:-5}
baseline=${VGPU_BENCH_BASELINE:-}
batch=256
common=(--quiet --set train.epochs=3 --set train.batch_size=$batch --set devices.cpu_threads=1 "$@")
if [ -n "$baseline" ] && [ ! -x "$baseline/vgpu_train" ]; then
  echo "bench_trace: VGPU_BENCH_BASELINE=$baseline has no vgpu_train" >&2
  exit 2
fi
trace=$(mktemp /tmp/vgpu-bench-trace.XXXXXX.json)
trap 'rm -f "$trace"' EXIT
echo "# bench_trace: np=$np $cfg ${common[*]}"
echo "# host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //');" \
     "$repeat pairs, order alternating"

# one BUILD [ARGS...]: one run; sets $ms (ms per step) and $line (its summary).
one() {
  local bin=$1/vgpu_train
  shift
  line=$(scripts/mpirun.sh -np "$np" "$bin" "$cfg" "${common[@]}" "$@" | tail -1)
  local sps
  sps=$(grep -oE 'samples_per_s=[0-9.]+' <<<"$line" | cut -d= -f2)
  [ -n "$sps" ] || { echo "bench_trace: run failed: $line" >&2; exit 1; }
  ms=$(echo "scale=4; $batch * 1000 / $sps" | bc)
}

offs="" ons="" ratios="" bases="" base_ratios=""
printf '%5s %12s %12s %8s' pair off_ms on_ms on/off
[ -n "$baseline" ] && printf ' %12s %10s' baseline_ms off/base
printf '\n'
for ((i = 1; i <= repeat; i++)); do
  if ((i % 2)); then
    one "$build"; off=$ms
    one "$build" --trace "$trace"; on=$ms
  else
    one "$build" --trace "$trace"; on=$ms
    one "$build"; off=$ms
  fi
  r=$(echo "scale=4; $on / $off" | bc)
  offs+="$off " ons+="$on " ratios+="$r "
  printf '%5d %12.3f %12.3f %8.3f' "$i" "$off" "$on" "$r"
  if [ -n "$baseline" ]; then
    one "$baseline"
    b=$(echo "scale=4; $off / $ms" | bc)
    bases+="$ms " base_ratios+="$b "
    printf ' %12.3f %10.3f' "$ms" "$b"
  fi
  printf '\n'
done
median() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
printf '%5s %12.3f %12.3f %8.3f' median "$(median "$offs")" "$(median "$ons")" "$(median "$ratios")"
[ -n "$baseline" ] && printf ' %12.3f %10.3f' "$(median "$bases")" "$(median "$base_ratios")"
printf '\n'
# The same cost bounded without the noise: what a span takes (measured here
# by trace_span_cost) times the spans a rank records a step.
spans=$(grep -o '"ph":"X"' "$trace" | wc -l)
steps=$(grep -oE ' steps=[0-9]+' <<<"$line" | cut -d= -f2)
echo "# the last trace: $spans spans from $np ranks over $steps steps, $(($(stat -c %s "$trace") / 1024)) KiB"
if [ -x "$build/trace_span_cost" ] && [ "${steps:-0}" -gt 0 ]; then
  cost=$("$build/trace_span_cost")
  on_ns=$(awk '$1 == "on_ns" { print $2 }' <<<"$cost")
  off_ns=$(awk '$1 == "off_ns" { print $2 }' <<<"$cost")
  awk -v spans="$spans" -v np="$np" -v steps="$steps" -v on="$on_ns" -v off="$off_ns" \
      -v step_ms="$(median "$offs")" 'BEGIN {
    per = spans / (np * steps)
    printf "# a span costs %.1f ns recorded, %.1f ns off; %.1f spans a rank a step: %.2f us a step" \
           " on (%.3f%% of the median step), %.3f us off (%.4f%%)\n",
           on, off, per, per * on / 1e3, per * on / 1e4 / step_ms, per * off / 1e3, per * off / 1e4 / step_ms
  }'
  # The counted device operations (issue 47): each costs two clock reads.
  ops=$(python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))
print(sum(e["args"]["n"] for e in d["traceEvents"] if e.get("cat") == "device" and e["name"] != "syncs"
          and e["name"] != "?"))' "$trace" 2>/dev/null || echo 0)
  awk -v ops="$ops" -v np="$np" -v steps="$steps" -v cost="$cost" -v step_ms="$(median "$offs")" 'BEGIN {
    split(cost, l, "\n"); for (i in l) { split(l[i], f, " "); v[f[1]] = f[2] }
    per = ops / (np * steps)
    printf "# a counted operation costs %.1f ns recorded, %.1f ns off; %.1f a rank a step (with"  \
           " evaluation): %.2f us a step on (%.3f%% of the median step)\n",
           v["op_on_ns"], v["op_off_ns"], per, per * v["op_on_ns"] / 1e3, per * v["op_on_ns"] / 1e4 / step_ms
  }'
fi
