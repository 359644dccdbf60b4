#!/usr/bin/env bash
# bench_allreduce.sh: ring vs mpi all-reduce, side by side, for np=2 and
# np=4 (oversubscribed on small machines), 8 B .. 64 MiB: time in
# microseconds out of place and in place, the ratio mpi time / ring time
# (above 1: the ring is faster), the ring's bus bandwidth, the deterministic
# all-reduce's (train.deterministic; TREE=8 micro-batch partials split over
# the ranks, summed in the canonical tree), and the algorithm the ring
# backend chose for the size (docs/COLLECTIVES.md).
# Usage: scripts/bench_allreduce.sh [build-dir] [extra vgpu_allreduce_perf options]
# Env: NPS="2 4", ITERS=20, MIN_MS=20, WARMUP=5, MINB=8, MAXB=64M, FACTOR=2, TREE=8 (0 = skip),
# REPEAT=3.
# MIN_MS: each size's timed calls last at least this long (more than ITERS
# where calls are short): 20 calls of 10 us would sit inside one time slice
# of a machine whose ranks outnumber its cores, and read its luck.
# REPEAT: mpi and ring run this many times, in turn, and each size shows
# the median of its times (a busy scheduler can still make one run of one
# size several times slower than its neighbours).
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
repeat=${REPEAT:-3}
[[ $repeat =~ ^[1-9][0-9]*$ ]] || { echo "bench_allreduce: REPEAT must be a count >= 1" >&2; exit 2; }

run() { # np backend run-number [extra options]
  local np=$1 b=$2 k=$3
  shift 3
  "$here/mpirun.sh" -np "$np" "$perf" --backend "$b" --minbytes "${MINB:-8}" \
    --maxbytes "${MAXB:-64M}" --stepfactor "${FACTOR:-2}" --iters "${ITERS:-20}" --min_ms "${MIN_MS:-20}" \
    --warmup_iters "${WARMUP:-5}" --check 1 "$@" >"$tmp/$np-$b.$k.txt" 2>&1 ||
    { cat "$tmp/$np-$b.$k.txt" >&2; echo "bench_allreduce: np=$np $b FAILED" >&2; exit 1; }
}

# medians FILE...: "size oop ip algorithm wrong" a size, the median time of
# each column over the runs (the lower middle one of an even count) and the
# wrong results of all of them.
medians() {
  awk '!/^#/ && NF >= 13 {
         if (!($1 in n)) order[++sizes] = $1
         k = ++n[$1]; oop[$1, k] = $6; ip[$1, k] = $10; alg[$1] = $14; bad[$1] += $9 + $13 }
       function median(a, s, c,   i, j, t, v) {
         for (i = 1; i <= c; i++) v[i] = a[s, i]
         for (i = 2; i <= c; i++) for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
         return v[int((c + 1) / 2)] }
       END { for (i = 1; i <= sizes; i++) { s = order[i]
               print s, median(oop, s, n[s]), median(ip, s, n[s]), alg[s], bad[s] } }' "$@"
}

echo "# vgpu all-reduce, float sum: time in us; ratio = mpi time / ring time; busbw in GB/s"
echo "# (bytes/time * 2(n-1)/n) of the ring and of the deterministic tree"
echo "# host: $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)"
echo "# each time: the median of $repeat run(s), mpi and ring in turn"
for np in $nps; do
  for k in $(seq "$repeat"); do
    for b in mpi ring; do run "$np" "$b" "$k" "$@"; done
  done
  tree=${TREE:-8}
  if [ "$tree" -gt 0 ]; then
    "$here/mpirun.sh" -np "$np" "$perf" --backend ring --tree "$tree" --minbytes "${MINB:-8}" \
      --maxbytes "${MAXB:-64M}" --stepfactor "${FACTOR:-2}" --iters "${ITERS:-20}" --min_ms "${MIN_MS:-20}" \
      --warmup_iters "${WARMUP:-5}" --check 1 "$@" >"$tmp/$np-tree.txt" 2>&1 ||
      { cat "$tmp/$np-tree.txt" >&2; echo "bench_allreduce: np=$np tree FAILED" >&2; exit 1; }
  else
    cp "$tmp/$np-ring.1.txt" "$tmp/$np-tree.txt"
  fi
  medians "$tmp/$np"-mpi.*.txt >"$tmp/$np-mpi.rows"
  medians "$tmp/$np"-ring.*.txt >"$tmp/$np-ring.rows"
  echo
  echo "## np=$np  ($( [ "$np" -gt "$(nproc)" ] && echo oversubscribed || echo "one core per rank or more"))"
  printf "%10s | %8s %8s %7s | %8s %8s %7s | %7s %7s | %s\n" "size (B)" "mpi oop" "ring oop" \
    "ratio" "mpi ip" "ring ip" "ratio" "busbw" "tree" "algorithm"
  # Joined: size | mpi oop ip algorithm wrong | ring oop ip algorithm wrong | tree busbw.
  # The ring's busbw is that of its median out-of-place time.
  join --nocheck-order "$tmp/$np-mpi.rows" "$tmp/$np-ring.rows" |
    join --nocheck-order - <(awk '!/^#/ && NF >= 13 { print $1, $8 }' "$tmp/$np-tree.txt") |
    awk -v np="$np" '{ printf "%10d | %8.1f %8.1f %6.2fx | %8.1f %8.1f %6.2fx | %7.2f %7.2f | %s\n",
                  $1, $2, $6, $2 / ($6 > 0 ? $6 : 1e-9), $3, $7, $3 / ($7 > 0 ? $7 : 1e-9),
                  ($6 > 0 ? $1 / $6 / 1e3 * 2 * (np - 1) / np : 0), $10, $8 }'
  for b in mpi ring; do
    printf "# %-4s: %d run(s), wrong results: %d\n" "$b" "$repeat" \
      "$(awk '{ w += $5 } END { print w + 0 }' "$tmp/$np-$b.rows")"
  done
  printf "# tree: %s, %s\n" "$(grep 'Avg bus bandwidth' "$tmp/$np-tree.txt" | sed 's/^# *//')" \
    "$(tail -1 "$tmp/$np-tree.txt")"
done
