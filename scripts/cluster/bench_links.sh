#!/usr/bin/env bash
# bench_links.sh: all-reduce bus bandwidth of the ring and of MPI across local
# hosts (scripts/cluster/hosts.sh) at several link models, beside the limit the
# link model sets: how much of a link each path uses, with real data moved.
# Usage: scripts/cluster/bench_links.sh [--hosts N] [--ranks-per-host R] [--size BYTES] [MODEL...]
#   MODEL as hosts.sh --link (none, 10gbit, 1gbit, 100mbit,50us ...);
#   default: none 10gbit 1gbit 200mbit. Default one rank per host: every byte
#   of the ring crosses a link. Needs root. Env: ITERS=10, WARMUP=2, BUILD=build,
#   PERF_ARGS (more vgpu_allreduce_perf options, e.g. "--slice 4M").
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../..
build=${BUILD:-$root/build}
hosts=4 per_host=1 size=16M
models=()
while [ $# -gt 0 ]; do
  case $1 in
    --hosts) hosts=${2:-}; shift 2 ;;
    --size) size=${2:-}; shift 2 ;;
    --ranks-per-host) per_host=${2:-}; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "bench_links: unknown option $1" >&2; exit 2 ;;
    *) models+=("$1"); shift ;;
  esac
done
[ ${#models[@]} -gt 0 ] || models=(none 10gbit 1gbit 200mbit)
[[ $hosts =~ ^[2-9]$|^1[0-6]$ ]] || { echo "bench_links: --hosts: 2 to 16" >&2; exit 2; }
[[ $per_host =~ ^[1-8]$ ]] || { echo "bench_links: --ranks-per-host: 1 to 8" >&2; exit 2; }
ranks=$((hosts * per_host))
[ "$(id -u)" = 0 ] || { echo "bench_links: needs root (it makes network namespaces): run it with sudo" >&2; exit 1; }
perf=$build/vgpu_allreduce_perf
[ -x "$perf" ] || { echo "bench_links: $perf not built (cmake --build $build)" >&2; exit 2; }

name=bench$$
name=${name:0:8}
tmp=$(mktemp -d)
trap '"$here/hosts.sh" down --name "$name" >/dev/null || true; rm -rf "$tmp"' EXIT
"$here/hosts.sh" up "$hosts" --slots "$per_host" --name "$name" >/dev/null
eval "$("$here/hosts.sh" env --name "$name")"

# busbw BACKEND: "BUSBW TIME": the bus bandwidth (GB/s) and time (us) of the
# out-of-place all-reduce at $size.
busbw() {
  "$build/vgpurun" -np "$ranks" --hostfile "$VGPU_HOSTFILE" -- "$perf" --backend "$1" \
    --minbytes "$size" --maxbytes "$size" --iters "${ITERS:-10}" --warmup_iters "${WARMUP:-2}" \
    --check 1 ${PERF_ARGS:-} >"$tmp/out" 2>&1 || { cat "$tmp/out" >&2; echo "bench_links: $1 FAILED" >&2; exit 1; }
  # From the time column (perf prints GB/s with two decimals).
  awk -v n="$ranks" '!/^#/ && NF >= 13 { v = $1 / ($6 * 1e-6) * 2 * (n - 1) / n / 1e9; t = $6 }
                      END { printf "%.4f %.1f", v, t }' "$tmp/out"
}

echo "# all-reduce across $hosts local hosts (network namespaces), $per_host rank(s) each, $size bytes,"
echo "# float sum: bus bandwidth GB/s (busbw = bytes/time x 2(n-1)/n, n = $ranks ranks; a link's"
echo "# limit is its rate, each way) and time in us"
echo "# host: $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)"
printf "%-16s | %10s | %9s %9s | %10s | %10s %10s\n" "link" "limit GB/s" "mpi" "ring" \
  "ring/limit" "mpi us" "ring us"
for m in "${models[@]}"; do
  "$here/hosts.sh" link "$m" --name "$name" >/dev/null
  limit=$(awk -v m="${m%%,*}" 'BEGIN {
    if (m == "none") { print "-"; exit }
    v = m + 0; u = substr(m, length(v "") + 1)
    f = (u == "kbit") ? 1e3 : (u == "mbit") ? 1e6 : (u == "gbit") ? 1e9 : 1e12
    printf "%.3f", v * f / 8 / 1e9 }')
  r=$(busbw mpi)
  read -r mpi mpi_us <<<"$r"
  r=$(busbw ring)
  read -r ring ring_us <<<"$r"
  share=$(awk -v r="$ring" -v l="$limit" 'BEGIN { if (l == "-") print "-"; else printf "%.0f%%", 100 * r / l }')
  printf "%-16s | %10s | %9.4f %9.4f | %10s | %10s %10s\n" "$m" "$limit" "$mpi" "$ring" "$share" \
    "$mpi_us" "$ring_us"
done
