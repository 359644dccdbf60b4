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
# The first rank to time out aborts the job, so the other waiting rank may be
# killed before it reports: at least one must report, and every report must
# be a timeout within the bound.
reports=$(sed -n "s/^\[rank [02]\] comm_all_reduce -> \(.*\) after \([0-9.]*\) s$/\1|\2/p" "$out")
[ -n "$reports" ] || fail "no rank reported how its collective ended"
while IFS='|' read -r status took; do
  [ "$status" = "timed out" ] || fail "a rank's collective ended with '$status', not a timeout"
  awk -v t="$took" -v lim=$((timeout_s + 5)) 'BEGIN { exit !(t <= lim) }' ||
    fail "a rank took $took s (limit $((timeout_s + 5)) s)"
done <<<"$reports"
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
