#!/usr/bin/env bash
# comm_timeout.sh: a rank that never enters a collective must not hang the
# others: with comm timeout T they end within T + 5 s with a message that
# names the rank they waited for, and the job is aborted. The same for the
# deterministic all-reduce's all-to-all on the ring and mpi backends.
set -uo pipefail
build=${VGPU_BUILD_DIR:?}
src=${VGPU_SOURCE_DIR:?}
timeout_s=2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
start=$(date +%s.%N)
timeout 60 "$src/scripts/mpirun.sh" -np 3 "$build/test_comm_collectives" --backend ring \
  --timeout $timeout_s --sleep-rank 1 >"$out" 2>&1
rc=$?
end=$(date +%s.%N)
cat "$out"
fail() { echo "comm_timeout: FAILED: $*"; exit 1; }
[ $rc -ne 0 ] || fail "the job succeeded although rank 1 never arrived"
[ $rc -ne 124 ] || fail "the job hung (killed by timeout 60)"
grep -q "collective timed out after [0-9.]* s waiting for rank [02] (host" "$out" ||
  fail "no 'collective timed out' message"
grep -q "is the furthest behind\|waiting for rank 1 " "$out" || fail "rank 1 is not named"
grep -q "still waiting for rank" "$out" || fail "no warning at half the timeout"
# Every rank that called the collective reports how long it took.
for r in 0 2; do
  took=$(sed -n "s/^\[rank $r\] comm_all_reduce -> timed out after \([0-9.]*\) s$/\1/p" "$out" | head -1)
  [ -n "$took" ] || took=$(sed -n "s/^\[rank $r\] comm_all_reduce -> .* after \([0-9.]*\) s$/\1/p" "$out" | head -1)
  if [ -n "$took" ]; then
    awk -v t="$took" -v lim=$((timeout_s + 5)) 'BEGIN { exit !(t <= lim) }' ||
      fail "rank $r took $took s (limit $((timeout_s + 5)) s)"
  fi
done
grep -q "comm_all_reduce -> timed out after" "$out" || fail "no rank returned VGPU_ETIMEOUT"
elapsed=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
awk -v e="$elapsed" 'BEGIN { exit !(e < 30) }' || fail "the job took $elapsed s"
echo "comm_timeout: ring all-reduce OK (job ended after $elapsed s)"

# The deterministic all-reduce's all-to-all (both backends) is bounded too.
for backend in ring mpi; do
  start=$(date +%s.%N)
  timeout 60 "$src/scripts/mpirun.sh" -np 3 "$build/vgpu_allreduce_perf" --backend $backend \
    --tree 6 --maxbytes 1M --timeout $timeout_s --sleep-rank 1 --sleep 60 >"$out" 2>&1
  rc=$?
  end=$(date +%s.%N)
  [ $rc -ne 0 ] || { cat "$out"; fail "tree ($backend): the job succeeded although rank 1 slept"; }
  [ $rc -ne 124 ] || { cat "$out"; fail "tree ($backend): the job hung"; }
  grep -q "collective (all-to-all) still waiting" "$out" || { cat "$out"; fail "tree ($backend): no warning"; }
  grep -q "collective timed out after [0-9.]* s in all-to-all" "$out" ||
    { cat "$out"; fail "tree ($backend): no 'timed out' message"; }
  elapsed=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
  awk -v e="$elapsed" -v lim=$((timeout_s + 10)) 'BEGIN { exit !(e < lim) }' ||
    fail "tree ($backend): the job took $elapsed s"
  echo "comm_timeout: tree all-to-all ($backend) OK (job ended after $elapsed s)"
done
