#!/usr/bin/env bash
# bench_allreduce_algos.sh: where the ring backend's all-reduce algorithms
# cross over on this machine: for each rank count, the time of MPI_Allreduce
# and of the ring backend with each algorithm forced (VGPU_RING_ALGO=ring,
# one-shot, two-shot, direct), side by side, and the one `auto` picks. The
# choice's thresholds (launcher/comm/ring/ring_shot.c) come from this table
# (docs/COLLECTIVES.md: Choosing the algorithm).
# Usage: scripts/bench_allreduce_algos.sh [build-dir]
# Env: NPS="2 3 4", ITERS=50, WARMUP=10, MINB=8, MAXB=4M.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
perf=$build/vgpu_allreduce_perf
[ -x "$perf" ] || { echo "bench_allreduce_algos: $perf not built (cmake --build $build)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

run() { # np backend algo
  VGPU_RING_ALGO=$3 "$here/mpirun.sh" -np "$1" "$perf" --backend "$2" --minbytes "${MINB:-8}" \
    --maxbytes "${MAXB:-4M}" --stepfactor 2 --iters "${ITERS:-50}" \
    --warmup_iters "${WARMUP:-10}" --check 1 >"$tmp/$3.txt" 2>&1 ||
    { cat "$tmp/$3.txt" >&2; echo "bench_allreduce_algos: np=$1 $2 $3 FAILED" >&2; exit 1; }
  # size, out-of-place and in-place time (us), wrong results, algorithm
  awk '!/^#/ && NF >= 13 { print $1, $6, $10, $9 + $13, $14 }' "$tmp/$3.txt" >"$tmp/$3.rows"
}

echo "# all-reduce time in us (out of place / in place), float sum; * = the fastest ring algorithm"
echo "# host: $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)"
for np in ${NPS:-2 3 4}; do
  algos="ring one-shot two-shot direct"
  run "$np" mpi auto
  mv "$tmp/auto.rows" "$tmp/mpi.rows"
  table=$tmp/mpi.rows
  for a in $algos auto; do
    run "$np" ring "$a"
    join --nocheck-order "$table" "$tmp/$a.rows" >"$tmp/joined" && mv "$tmp/joined" "$tmp/table"
    table=$tmp/table
  done
  echo
  echo "## np=$np  ($( [ "$np" -gt "$(nproc)" ] && echo oversubscribed || echo "one core per rank or more"))"
  printf "%10s | %15s" "size (B)" "mpi"
  for a in $algos; do printf " | %15s" "$a"; done
  printf " | %s\n" "auto picks"
  # Each column: out-of-place us, in-place us, wrong results, algorithm used.
  awk -v k="$(echo $algos | wc -w)" '{
      wrong = 0; for (c = 0; c <= k + 1; c++) wrong += $(4 + 4 * c)
      best = 1; for (c = 2; c <= k; c++) if ($(2 + 4 * c) + $(3 + 4 * c) < $(2 + 4 * best) + $(3 + 4 * best)) best = c
      printf "%10d | %7.1f %7.1f", $1, $2, $3
      for (c = 1; c <= k; c++) printf " | %6.1f%s %6.1f", $(2 + 4 * c), c == best ? "*" : " ", $(3 + 4 * c)
      printf " | %s%s\n", $(5 + 4 * (k + 1)), wrong ? "  WRONG RESULTS" : "" }' "$table"
done
