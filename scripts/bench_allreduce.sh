#!/usr/bin/env bash
# bench_allreduce.sh: ring vs mpi all-reduce bus bandwidth, side by side, for
# np=2 and np=4 (oversubscribed on small machines), 64 KiB .. 64 MiB, and the
# deterministic all-reduce (train.deterministic; TREE=8 micro-batch partials
# split over the ranks, summed in the canonical tree) beside them.
# Usage: scripts/bench_allreduce.sh [build-dir] [extra vgpu_allreduce_perf options]
# Env: NPS="2 4", ITERS=20, WARMUP=5, MINB=64K, MAXB=64M, FACTOR=2, TREE=8 (0 = skip).
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
  "$here/mpirun.sh" -np "$np" "$perf" --backend "$b" --minbytes "${MINB:-64K}" \
    --maxbytes "${MAXB:-64M}" --stepfactor "${FACTOR:-2}" --iters "${ITERS:-20}" \
    --warmup_iters "${WARMUP:-5}" --check 1 "$@" >"$tmp/$np-$b.txt" 2>&1 ||
    { cat "$tmp/$np-$b.txt" >&2; echo "bench_allreduce: np=$np $b FAILED" >&2; exit 1; }
}

echo "# vgpu all-reduce, float sum, bus bandwidth in GB/s (busbw = bytes/time * 2(n-1)/n)"
echo "# host: $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)"
for np in $nps; do
  for b in mpi ring; do run "$np" "$b" "$@"; done
  tree=${TREE:-8}
  if [ "$tree" -gt 0 ]; then
    "$here/mpirun.sh" -np "$np" "$perf" --backend ring --tree "$tree" --minbytes "${MINB:-64K}" \
      --maxbytes "${MAXB:-64M}" --stepfactor "${FACTOR:-2}" --iters "${ITERS:-20}" \
      --warmup_iters "${WARMUP:-5}" --check 1 "$@" >"$tmp/$np-tree.txt" 2>&1 ||
      { cat "$tmp/$np-tree.txt" >&2; echo "bench_allreduce: np=$np tree FAILED" >&2; exit 1; }
  else
    cp "$tmp/$np-ring.txt" "$tmp/$np-tree.txt"
  fi
  echo
  echo "## np=$np  ($( [ "$np" -gt "$(nproc)" ] && echo oversubscribed || echo "one core per rank or more"))"
  printf "%12s | %9s %9s %7s | %9s %9s %7s | %11s\n" "size (B)" "mpi oop" "ring oop" "ratio" \
    "mpi ip" "ring ip" "ratio" "tree M=$tree"
  # Columns of a data row: size count type redop | time algbw busbw #wrong (x2).
  join <(awk '!/^#/ && NF >= 12 { print $1, $7, $11 }' "$tmp/$np-mpi.txt") \
       <(awk '!/^#/ && NF >= 12 { print $1, $7, $11 }' "$tmp/$np-ring.txt") |
    join - <(awk '!/^#/ && NF >= 12 { print $1, $7 }' "$tmp/$np-tree.txt") |
    awk '{ printf "%12d | %9.2f %9.2f %6.2fx | %9.2f %9.2f %6.2fx | %11.2f\n",
                  $1, $2, $4, $4 / ($2 > 0 ? $2 : 1e-9), $3, $5, $5 / ($3 > 0 ? $3 : 1e-9), $6 }'
  for b in mpi ring tree; do
    printf "# %-4s: %s, %s\n" "$b" "$(grep 'Avg bus bandwidth' "$tmp/$np-$b.txt" | sed 's/^# *//')" \
      "$(tail -1 "$tmp/$np-$b.txt")"
  done
done
