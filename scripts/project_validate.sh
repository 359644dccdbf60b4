#!/usr/bin/env bash
# project_validate.sh: issue 35's proof here (docs/PROJECTION.md#validation).
# A short run on this one host is projected with vgpu-project onto N
# namespace hosts (scripts/cluster/hosts.sh) behind a tc link model, before
# the same job runs across them; the row compares the projected step with
# the measured one. Needs root (network namespaces).
set -euo pipefail

usage() {
  cat <<'EOF'
usage: scripts/project_validate.sh [--links "L..."] [--hosts "N..."] [--latency LAT]
                                   [--config FILE] [--set KEY=VALUE]... [--write-docs] [--keep DIR]
Projects a one-host run of the default job (or --config's) onto N local hosts (network
namespaces, 1 rank a host) behind each link model, then runs it there and
prints a row a case: link, hosts, ranks, projected and measured step (ms a
rank, warm-up step excluded), error, and whether the case counts (this
2-core machine not the bottleneck: ranks <= cores, or the projected
communication >= 90% of the step). About 2-4 minutes. Needs root.
  --links "L..."  link models (hosts.sh RATE), default "1gbit 200mbit 50mbit"
  --hosts "N..."  host counts (2..4), default "2 3 4"
  --latency LAT   also each link with this netem delay (default 500us) when the
                  kernel has netem; "none" leaves latency cases out
  --config FILE   the job (default configs/default.ini); e.g. configs/gpt_small.ini,
                  whose all-reduces run beside the backward pass (train.bucket_mb)
  --set KEY=VALUE vgpu_train's --set for every run (several allowed)
  --write-docs    write the table into docs/PROJECTION.md (its marked block: the
                  default job's, or one named after --config's file)
  --repeat R      runs a case (default 3): the row takes their median step, as
                  other work on this machine (a build) slows a run by 20-50%
  --one-core      run the ranks across hosts all on core 0 (mpirun --bind-to core:
                  each host's daemon binds its rank to its first core): what
                  ranks sharing a core do to the step; such rows never count
  --keep DIR      keep the traces and outputs in DIR
Env: VGPU_BUILD_DIR (default build).
EOF
}

die() { echo "project_validate: $*" >&2; exit 1; }
bad_usage() { echo "project_validate: $*" >&2; echo "(scripts/project_validate.sh --help)" >&2; exit 2; }

here=$(cd "$(dirname "$0")/.." && pwd)
build=${VGPU_BUILD_DIR:-$here/build}
links="1gbit 200mbit 50mbit" hosts_list="2 3 4" latency=500us write_docs=0 keep="" repeat=3 bind=none
config=$here/configs/default.ini sets=()
while [ $# -gt 0 ]; do
  case $1 in
    --links) [ $# -ge 2 ] || bad_usage "--links needs a value"; links=$2; shift 2 ;;
    --hosts) [ $# -ge 2 ] || bad_usage "--hosts needs a value"; hosts_list=$2; shift 2 ;;
    --latency) [ $# -ge 2 ] || bad_usage "--latency needs a value"; latency=$2; shift 2 ;;
    --config) [ $# -ge 2 ] || bad_usage "--config needs a file"; config=$2; shift 2 ;;
    --set) [ $# -ge 2 ] || bad_usage "--set needs KEY=VALUE"; sets+=(--set "$2"); shift 2 ;;
    --write-docs) write_docs=1; shift ;;
    --one-core) bind=core; shift ;;
    --repeat) [ $# -ge 2 ] || bad_usage "--repeat needs a count"; repeat=$2; shift 2 ;;
    --keep) [ $# -ge 2 ] || bad_usage "--keep needs a directory"; keep=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) bad_usage "unknown argument '$1'" ;;
  esac
done
for l in $links; do
  [[ $l =~ ^[0-9]+(kbit|mbit|gbit)$ ]] || bad_usage "--links '$l': a rate such as 200mbit (latency: --latency)"
done
for n in $hosts_list; do [[ $n =~ ^[2-4]$ ]] || bad_usage "--hosts '$n': 2 to 4"; done
[ -f "$config" ] || bad_usage "--config '$config': no such file"
[[ $repeat =~ ^[1-9]$ ]] || bad_usage "--repeat '$repeat': 1 to 9"
[ "$bind" = none ] || [ "$write_docs" = 0 ] || bad_usage "--write-docs writes the validation table: not with --one-core"
[[ $latency == none || $latency =~ ^[0-9]+(us|ms)$ ]] || bad_usage "--latency '$latency': e.g. 500us, 2ms or none"

[ "$(id -u)" = 0 ] || die "needs root (it makes network namespaces with scripts/cluster/hosts.sh): run it with sudo"
for p in vgpu_train vgpu-project vgpu_gemm_perf vgpu_allreduce_perf; do
  [ -x "$build/$p" ] || die "$build/$p is not built (cmake --build $build)"
done
# Open MPI refuses root unless both are 1; the daemons on the namespace
# hosts inherit them from here (mpirun's --allow-run-as-root reaches mpirun only).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

HOSTS_SH=$here/scripts/cluster/hosts.sh
MPIRUN=$here/scripts/mpirun.sh
TARGET=$here/configs/targets/local_ns_1gbit.ini
CORES=$(nproc)
name=pv$(($$ % 1000000))
if [ -n "$keep" ]; then mkdir -p "$keep"; work=$(cd "$keep" && pwd); else work=$(mktemp -d); fi
cleanup() {
  "$HOSTS_SH" down --name "$name" >/dev/null 2>&1 || true
  [ -n "$keep" ] || rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Every run: one BLAS thread a rank, on one host and across hosts, whatever
# the machine's cores (the default: cores / the ranks on the machine).
JOB=("$config" --quiet --set devices.cpu_threads=1 --set sample.bytes=0 "${sets[@]}")

# steps_for LINK: few steps on slow links (a step carries ~0.94 MB a rank).
steps_for() {
  case $1 in *kbit|[0-9]mbit|[0-9][0-9]mbit) echo 16 ;; *mbit) echo 30 ;; *) echo 60 ;; esac
}

# rate_gbit RATE: the rate in Gbit/s.
rate_gbit() {
  awk -v m="$1" 'BEGIN { v = m + 0; u = substr(m, length(v "") + 1)
    f = (u == "kbit") ? 1e-6 : (u == "mbit") ? 1e-3 : 1; printf "%.6g", v * f }'
}

# The emulated link, described to the model as hosts.sh makes it (the
# target's inter.payload_share and inter.burst_bytes; the "bare" columns
# leave both at their defaults, a link whose whole rate is payload):
# payload_share: tbf meters whole frames; a collective's bytes are payload.
# A full TCP segment carries MTU - 52 bytes (IP 20, TCP 20, timestamps 12)
# in an MTU + 14 byte frame (tc's byte counters agree: 985 KB a host a step
# for the 940.6 KB a rank sends with 2 hosts, 0.955; ACKs, one a GRO batch,
# add little).
payload_share() {
  local mtu
  mtu=$(ip -n "$name-h0" -o link show eth0 | sed -n 's/.* mtu \([0-9]*\).*/\1/p')
  awk -v m="${mtu:-1500}" 'BEGIN { printf "%.4f", (m - 52) / (m + 14) }'
}
# bucket_bytes GBIT: tbf's bucket as hosts.sh sets it (what the rate earns in
# 4 ms, at least 64 KiB).
bucket_bytes() {
  awk -v g="$1" 'BEGIN { b = g * 1e9 / 8 / 250; if (b < 65536) b = 65536; printf "%d", b }'
}

# one_host: the trace and the calibration the projections start from.
one_host() {
  echo "# one host: 2 ranks (as many as cores), 40 steps, traced; calibration" >&2
  "$MPIRUN" -np 2 "$build/vgpu_train" "${JOB[@]}" --set train.max_steps=40 \
    --trace "$work/one.json" >"$work/one.out" 2>&1 ||
    { cat "$work/one.out" >&2; die "the one-host run failed"; }
  VGPU_BUILD_DIR=$build "$here/scripts/project_calibrate.sh" "$work/cal.ini" >"$work/cal.out" 2>&1 ||
    { cat "$work/cal.out" >&2; die "project_calibrate.sh failed"; }
}

# project N GBIT LAT_US SHARE BURST: "STEP COMPUTE COMM" (ms) projected for N
# hosts of one rank, the link's payload share and bucket as given.
project() {
  "$build/vgpu-project" --trace "$work/one.json" --target "$TARGET" --measured-on "$work/cal.ini" \
    --set target.hosts="$1" --set target.gpus_per_host=1 --set inter.gbit_per_s="$2" \
    --set inter.latency_us="$3" --set inter.payload_share="$4" --set inter.burst_bytes="$5" \
    --ranks "$1" >"$work/proj.out" 2>&1 ||
    { cat "$work/proj.out" >&2; die "vgpu-project failed"; }
  awk -v n="$1" '$1 == n && $2 == n && NF >= 10 { print $3, $4 + $6, $5; found = 1 }
                 END { exit !found }' "$work/proj.out" || die "no $1-GPU row in vgpu-project's output"
}

# measure N STEPS TAG: the step (ms a rank) of the job across N hosts, from
# its own trace (vgpu-project's profile: median over ranks' steps, warm-up out).
# --bind-to none: each host's daemon would bind its first rank to core 0,
# every rank on the same core (what --one-core asks for).
measure() {
  local n=$1 steps=$2 tag=$3
  "$MPIRUN" -np "$n" --bind-to "$bind" --hostfile "$VGPU_HOSTFILE" "$build/vgpu_train" "${JOB[@]}" \
    --set train.max_steps="$steps" --trace "$work/$tag.json" >"$work/$tag.out" 2>&1 ||
    { cat "$work/$tag.out" >&2; die "the run across $n hosts ($tag) failed"; }
  "$build/vgpu-project" --trace "$work/$tag.json" --target "$TARGET" --measured-on "$work/cal.ini" \
    --set device.measured=true \
    --set target.hosts="$n" --set target.gpus_per_host=1 --ranks "$n" >"$work/$tag.meas" 2>&1 ||
    { cat "$work/$tag.meas" >&2; die "vgpu-project could not read $tag.json"; }
  sed -n 's/^ *measured: step \([0-9.]*\) ms.*/\1/p' "$work/$tag.meas" | head -1 | grep . ||
    die "no 'measured: step' line for $tag"
}

# measure_median N STEPS TAG: "MEDIAN MIN MAX", the steps of $repeat runs.
measure_median() {
  local i all=()
  for ((i = 1; i <= repeat; i++)); do all+=("$(measure "$1" "$2" "$3.$i")"); done
  echo "#   runs: ${all[*]} ms" >&2
  printf '%s\n' "${all[@]}" | sort -g |
    awk '{ v[NR] = $1 } END { print ((NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2), v[1], v[NR] }'
}

# counts N STEP COMM: "yes" or "no (why)". This machine must not be what is
# measured: ranks <= cores, or the link's share of the projected step so large
# (>= 90%) that ranks sharing cores (at most 2x the CPU's part, 4 ranks on 2
# cores) could move the step by no more than the 10% goal.
counts() {
  if [ "$bind" = core ]; then echo "no (--one-core: every rank on core 0)"; return; fi
  if [ "$1" -le "$CORES" ]; then echo yes; return; fi
  awk -v s="$2" -v c="$3" -v n="$1" -v k="$CORES" 'BEGIN {
    share = 100 * c / s
    if (share >= 90) print "yes"
    else printf "no (%d ranks on %d cores, comm %.0f%% < 90%% of the step)\n", n, k, share }'
}

# netem_ok: the kernel can delay packets (hosts.sh refuses latency without it).
netem_ok() {
  local probe=vgpv$$ rc=0
  ip link add "$probe" type veth peer name "${probe}b" 2>/dev/null || return 1
  tc qdisc add dev "$probe" root netem delay 1us 2>/dev/null || rc=1
  ip link del "$probe" 2>/dev/null || true
  return $rc
}

latency_us() {
  case $1 in none) echo 0 ;; *us) echo "${1%us}" ;; *ms) awk -v v="${1%ms}" 'BEGIN { print v * 1000 }' ;; esac
}

rows=()
# run_case MODEL N: measures one case and adds its row.
run_case() {
  local model=$1 n=$2 rate lat lat_us steps gbit measured lo hi err bare_err verdict tag
  rate=${model%%,*}
  lat=none
  [[ $model == *,* ]] && lat=${model#*,}
  steps=$(steps_for "$rate")
  gbit=$(rate_gbit "$rate")
  lat_us=$(latency_us "$lat")
  read -r p_step p_compute p_comm <<<"$(project "$n" "$gbit" "$lat_us" "$share" "$(bucket_bytes "$gbit")")"
  read -r bare _ <<<"$(project "$n" "$gbit" "$lat_us" 1 0)"
  tag=${model//,/_}-$n
  echo "# $model, $n hosts: projected $p_step ms; running $steps steps" >&2
  read -r measured lo hi <<<"$(measure_median "$n" "$steps" "$tag")"
  err=$(awk -v p="$p_step" -v m="$measured" 'BEGIN { printf "%+.1f", 100 * (p - m) / m }')
  bare_err=$(awk -v p="$bare" -v m="$measured" 'BEGIN { printf "%+.1f", 100 * (p - m) / m }')
  verdict=$(counts "$n" "$p_step" "$p_comm")
  rows+=("$(printf '| %s | %d | %d | %d | %.2f | %.2f | %.2f | %.2f | %s%% | %.2f | %s%% | %s | %.1f-%.1f |' \
    "$model" "$n" "$n" "$steps" "$p_compute" "$p_comm" "$p_step" "$measured" "$err" "$bare" \
    "$bare_err" "$verdict" "$lo" "$hi")")
  echo "${rows[-1]}"
}

header() {
  echo "| link | hosts | ranks | steps | compute ms | comm ms | projected ms | measured ms | error | bare link ms | bare error | counts | runs ms |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"
}

# summary: median and max |error| over the counted rows, of the projection
# (field 10) and of the one on a bare link (12).
summary() {
  printf '%s\n' "${rows[@]}" | awk -F'|' '
    function stats(f,   i, j, t, e, v, n, med) {
      n = 0
      for (i = 1; i <= nr; i++) { e = row[i, f]; gsub(/[ %+]/, "", e); if (e < 0) e = -e; v[++n] = e + 0 }
      for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
      med = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
      return sprintf("median |error| %.1f%%, max %.1f%%", med, v[n])
    }
    $13 ~ /^ *yes/ { nr++; row[nr, 10] = $10; row[nr, 12] = $12 }
    END {
      if (!nr) { print "no case counted"; exit }
      printf "%d cases counted: projection %s (goals: <= 5%%, <= 10%% each); on a bare link %s\n",
        nr, stats(10), stats(12) }'
}

main() {
  local hmax=0 n model models=() note=""
  for n in $hosts_list; do [ "$n" -gt "$hmax" ] && hmax=$n; done
  for model in $links; do models+=("$model"); done
  if [ "$latency" != none ]; then
    if netem_ok; then
      for model in $links; do models+=("$model,$latency"); done
    else
      note="Latency cases left out: this kernel has no netem (CONFIG_NET_SCH_NETEM), which hosts.sh needs to delay packets."
    fi
  fi
  read -r load _ </proc/loadavg
  awk -v l="$load" 'BEGIN { exit !(l > 0.5) }' &&
    echo "project_validate: warning: load average $load: other work on this machine slows the runs" >&2
  one_host
  "$HOSTS_SH" up "$hmax" --slots 1 --name "$name" >/dev/null
  eval "$("$HOSTS_SH" env --name "$name")"
  share=$(payload_share) # the hosts' MTU, read once
  echo "# the links: payload share $share (TCP/IP and Ethernet headers), tbf's bucket as hosts.sh sets it" >&2
  header
  for model in "${models[@]}"; do
    "$HOSTS_SH" link "$model" --name "$name" >/dev/null
    for n in $hosts_list; do run_case "$model" "$n"; done
  done
  [ -z "$note" ] || echo "$note"
  summary
  if [ "$write_docs" = 1 ]; then write_docs_block "$note"; fi
}

# write_docs_block NOTE: the table, the machine, the date and the command
# between the markers of docs/PROJECTION.md.
write_docs_block() {
  local doc=$here/docs/PROJECTION.md block cpu table="validation table" how=""
  # The default job's block, or one of --config's own (its file's name).
  if [ "$(basename "$config")" != default.ini ]; then
    table="validation table $(basename "$config" .ini)"
    how=" --config configs/$(basename "$config")"
  fi
  grep -q "^<!-- $table: begin -->\$" "$doc" && grep -q "^<!-- $table: end -->\$" "$doc" ||
    die "$doc has no '<!-- $table: begin/end -->' markers"
  cpu=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)
  block=$work/block.md
  {
    echo "Measured $(date -u +%Y-%m-%d) on ${cpu:-this CPU}, $CORES cores, by"
    echo "\`scripts/project_validate.sh$how --repeat $repeat --write-docs\` (links: $links; hosts: $hosts_list; the median of $repeat runs a case;"
    echo "load average before: $load):"
    echo
    header
    printf '%s\n' "${rows[@]}"
    echo
    [ -z "$1" ] || { echo "$1"; echo; }
    echo "$(summary)."
  } >"$block"
  awk -v f="$block" -v b="<!-- $table: begin -->" -v e="<!-- $table: end -->" '
    $0 == b { print; while ((getline l < f) > 0) print l; skip = 1; next }
    $0 == e { skip = 0 }
    !skip' "$doc" >"$doc.tmp.$$"
  mv "$doc.tmp.$$" "$doc"
  echo "project_validate: wrote the table into $doc" >&2
}

main
