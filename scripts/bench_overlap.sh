#!/usr/bin/env bash
# bench_overlap.sh: what train.bucket_mb (the gradient's all-reduce in
# buckets beside the backward pass) does to a step across hosts. The job
# (configs/gpt_small.ini by default) trains on N network-namespace hosts
# (scripts/cluster/hosts.sh) behind each link model, one rank a host and one
# BLAS thread a rank (one rank a core), with each bucket setting in turn;
# rounds alternate the settings' order, and each row is the median of its
# rounds. Needs root.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: scripts/bench_overlap.sh [--links "L..."] [--hosts N] [--buckets "MB..."]
                                [--steps S] [--repeat R] [--config FILE]
Prints a row a link and train.bucket_mb: ms a step (from samples_per_s), the
communication the step waited for (exposed_ms, the slowest rank's), its share
of the step, the step's speed against the first setting, and the rounds'
fastest and slowest step (the spread the medians come from). Ends with OK, or
FAILED (exit 1) when a run failed.
  --links "L..."    link models (hosts.sh RATE[,LATENCY]), default "1gbit 200mbit"
  --hosts N         namespace hosts, one rank each (2..4), default 2
  --buckets "MB..." train.bucket_mb values, default "0 1" (0: one all-reduce
                    after the backward pass)
  --steps S         training steps a run (default 30)
  --repeat R        rounds (default 3)
  --config FILE     the job (default configs/gpt_small.ini)
Env: VGPU_BUILD_DIR (default build).
EOF
}

die() { echo "bench_overlap: $*" >&2; echo "FAILED"; exit 1; }
bad_usage() { echo "bench_overlap: $*" >&2; echo "(scripts/bench_overlap.sh --help)" >&2; exit 2; }

here=$(cd "$(dirname "$0")/.." && pwd)
build=${VGPU_BUILD_DIR:-$here/build}
links="1gbit 200mbit" hosts=2 buckets="0 1" steps=30 repeat=3 config=$here/configs/gpt_small.ini
while [ $# -gt 0 ]; do
  case $1 in
    --links) links=${2:-}; shift 2 || bad_usage "--links needs a value" ;;
    --hosts) hosts=${2:-}; shift 2 || bad_usage "--hosts needs a value" ;;
    --buckets) buckets=${2:-}; shift 2 || bad_usage "--buckets needs a value" ;;
    --steps) steps=${2:-}; shift 2 || bad_usage "--steps needs a value" ;;
    --repeat) repeat=${2:-}; shift 2 || bad_usage "--repeat needs a value" ;;
    --config) config=${2:-}; shift 2 || bad_usage "--config needs a value" ;;
    -h|--help) usage; exit 0 ;;
    *) bad_usage "unknown argument '$1'" ;;
  esac
done
[[ $hosts =~ ^[2-4]$ ]] || bad_usage "--hosts $hosts: 2 to 4"
[[ $steps =~ ^[1-9][0-9]*$ ]] || bad_usage "--steps $steps: a positive count"
[[ $repeat =~ ^[1-9][0-9]*$ ]] || bad_usage "--repeat $repeat: a positive count"
[ -n "$links" ] && [ -n "$buckets" ] || bad_usage "--links and --buckets need at least one value"
[ -f "$config" ] || bad_usage "--config $config: no such file"
[ "$(id -u)" = 0 ] || die "needs root (it makes network namespaces with scripts/cluster/hosts.sh)"
[ -x "$build/vgpu_train" ] || die "$build/vgpu_train is not built (cmake --build $build)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 # the hosts' daemons too

HOSTS_SH=$here/scripts/cluster/hosts.sh
name=bo$(($$ % 1000000))
cleanup() { "$HOSTS_SH" down --name "$name" >/dev/null 2>&1 || true; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# The global batch: the config's, else the default (--help-config prints the defaults).
batch_of() { awk '/^\[/ { on = ($1 == "[train]"); next } on && $1 == "batch_size" && $2 == "=" { print $3; exit }'; }
batch=$(batch_of <"$config")
batch=${batch:-$("$build/vgpu_train" --help-config | batch_of)}

# median VALUES...
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

"$HOSTS_SH" up "$hosts" --slots 1 --name "$name" >/dev/null
eval "$("$HOSTS_SH" env --name "$name")"
echo "# $config on $hosts namespace hosts, 1 rank a host, 1 BLAS thread a rank; $steps steps a run, median of $repeat rounds"
echo "# CPU: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(nproc) cores"
printf '%-10s %9s %10s %11s %8s %9s  %s\n' link bucket_mb step_ms exposed_ms exposed speed runs_ms
failed=0
for link in $links; do
  "$HOSTS_SH" link "$link" --name "$name" >/dev/null
  declare -A step_of=() exp_of=()
  set -- $buckets
  for ((r = 0; r < repeat; r++)); do
    order=("$@")
    if ((r % 2)); then order=(); for ((i = $#; i >= 1; i--)); do order+=("${!i}"); done; fi
    for mb in "${order[@]}"; do
      out=$(timeout 900 "$build/vgpurun" -np "$hosts" --hostfile "$VGPU_HOSTFILE" -- \
              "$build/vgpu_train" "$config" --quiet --set train.max_steps="$steps" \
              --set sample.bytes=0 --set devices.cpu_threads=1 --set train.bucket_mb="$mb" 2>&1) ||
        { echo "bench_overlap: $link bucket_mb=$mb failed:" >&2; tail -5 <<<"$out" >&2; failed=1; continue; }
      done_line=$(grep '^vgpu_train: done' <<<"$out" | tail -1)
      sps=$(grep -oE 'samples_per_s=[0-9.]+' <<<"$done_line" | cut -d= -f2)
      exposed=$(grep -oE 'exposed_ms=[0-9.,]+' <<<"$done_line" | cut -d= -f2 | tr , '\n' | sort -g | tail -1)
      [ -n "$sps" ] && [ -n "$exposed" ] || { echo "bench_overlap: no summary from $link bucket_mb=$mb" >&2; failed=1; continue; }
      step_of[$mb]+=" $(awk -v b="$batch" -v s="$sps" 'BEGIN { printf "%.2f", 1000 * b / s }')"
      exp_of[$mb]+=" $exposed"
    done
  done
  base=""
  for mb in "$@"; do
    [ -n "${step_of[$mb]:-}" ] || continue
    step=$(median ${step_of[$mb]}) exposed=$(median ${exp_of[$mb]})
    lo=$(printf '%s\n' ${step_of[$mb]} | sort -g | head -1) hi=$(printf '%s\n' ${step_of[$mb]} | sort -g | tail -1)
    base=${base:-$step}
    awk -v l="$link" -v m="$mb" -v s="$step" -v e="$exposed" -v b="$base" -v lo="$lo" -v hi="$hi" \
      'BEGIN { printf "%-10s %9s %10.1f %11.1f %7.0f%% %8.2fx  %.1f-%.1f\n", l, m, s, e, 100 * e / s, b / s, lo, hi }'
  done
  unset step_of exp_of
done
[ "$failed" = 0 ] || { echo "FAILED"; exit 1; }
echo "OK"
