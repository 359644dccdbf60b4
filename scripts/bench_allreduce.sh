#!/usr/bin/env bash
# bench_allreduce.sh: ring vs mpi all-reduce, side by side, for np=2 and
# np=4 (oversubscribed on small machines), 8 B .. 64 MiB: time in
# microseconds out of place and in place, the ratio mpi time / ring time
# (above 1: the ring is faster), the ring's bus bandwidth, the deterministic
# all-reduce's (train.deterministic; TREE=8 micro-batch partials split over
# the ranks, summed in the canonical tree), and the algorithm the ring
# backend chose for the size (docs/COLLECTIVES.md).
# Usage: scripts/bench_allreduce.sh [build-dir] [extra vgpu_allreduce_perf options]
# Env: NPS="2 4", ITERS=20, MIN_MS=20, WARMUP=5, MINB=8, MAXB=64M, FACTOR=2, TREE=8 (0 = skip).
# MIN_MS: each size's timed calls last at least this long (more than ITERS
# where calls are short): 20 calls of 10 us would sit inside one time slice
# of a machine whose ranks outnumber its cores, and read its luck.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
shift || true
perf=$build/vgpu_allreduce_perf
[ -x "$perf" ] || { echo "bench_allreduce: $perf not built (cmake --build $build)" >&2; exit 2; }
nps=${NPS:-2 4}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Long options only: scripts/mpirun.sh takes -n/-c anywhere as the rank count.
run() { # np backend [extra options]
  local np=$1 b=$2
  shift 2
  "$here/mpirun.sh" -np "$np" "$perf" --backend "$b" --minbytes "${MINB:-8}" \
    --maxbytes "${MAXB:-64M}" --stepfactor "${FACTOR:-2}" --iters "${ITERS:-20}" --min_ms "${MIN_MS:-20}" \
    --warmup_iters "${WARMUP:-5}" --check 1 "$@" >"$tmp/$np-$b.txt" 2>&1 ||
    { cat "$tmp/$np-$b.txt" >&2; echo "bench_allreduce: np=$np $b FAILED" >&2; exit 1; }
}

echo "# vgpu all-reduce, float sum: time in us; ratio = mpi time / ring time; busbw in GB/s"
echo "# (bytes/time * 2(n-1)/n) of the ring and of the deterministic tree"
echo "# host: $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)"
for np in $nps; do
  for b in mpi ring; do run "$np" "$b" "$@"; done
  tree=${TREE:-8}
  if [ "$tree" -gt 0 ]; then
    "$here/mpirun.sh" -np "$np" "$perf" --backend ring --tree "$tree" --minbytes "${MINB:-8}" \
      --maxbytes "${MAXB:-64M}" --stepfactor "${FACTOR:-2}" --iters "${ITERS:-20}" --min_ms "${MIN_MS:-20}" \
      --warmup_iters "${WARMUP:-5}" --check 1 "$@" >"$tmp/$np-tree.txt" 2>&1 ||
      { cat "$tmp/$np-tree.txt" >&2; echo "bench_allreduce: np=$np tree FAILED" >&2; exit 1; }
  else
    cp "$tmp/$np-ring.txt" "$tmp/$np-tree.txt"
  fi
  echo
  echo "## np=$np  ($( [ "$np" -gt "$(nproc)" ] && echo oversubscribed || echo "one core per rank or more"))"
  printf "%10s | %8s %8s %7s | %8s %8s %7s | %7s %7s | %s\n" "size (B)" "mpi oop" "ring oop" \
    "ratio" "mpi ip" "ring ip" "ratio" "busbw" "tree" "algorithm"
  # Columns of a data row: size count type redop | time algbw busbw #wrong (x2) | algorithm.
  join --nocheck-order <(awk '!/^#/ && NF >= 12 { print $1, $5, $9 }' "$tmp/$np-mpi.txt") \
       <(awk '!/^#/ && NF >= 12 { print $1, $5, $9, $7, $13 }' "$tmp/$np-ring.txt") |
    join --nocheck-order - <(awk '!/^#/ && NF >= 12 { print $1, $7 }' "$tmp/$np-tree.txt") |
    awk '{ printf "%10d | %8.1f %8.1f %6.2fx | %8.1f %8.1f %6.2fx | %7.2f %7.2f | %s\n",
                  $1, $2, $4, $2 / ($4 > 0 ? $4 : 1e-9), $3, $5, $3 / ($5 > 0 ? $5 : 1e-9),
                  $6, $8, $7 }'
  for b in mpi ring tree; do
    printf "# %-4s: %s, %s\n" "$b" "$(grep 'Avg bus bandwidth' "$tmp/$np-$b.txt" | sed 's/^# *//')" \
      "$(tail -1 "$tmp/$np-$b.txt")"
  done
done
