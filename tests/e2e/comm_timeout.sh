#!/usr/bin/env bash
# comm_timeout.sh: a rank that never enters a collective must not hang the
# others: with comm timeout T they end within T + 5 s with a message that
# names the rank they waited for, and the job is aborted. The same for the
# deterministic all-reduce's all-to-all on the ring and mpi backends.
source "$(dirname "$0")/lib.sh"
timeout_s=2
limit=$((timeout_s + 5))

run ring_all_reduce 60 "$MPIRUN" -np 3 "$VGPU_BUILD_DIR/test_comm_collectives" --backend ring \
  --timeout $timeout_s --sleep-rank 1
expect_nonzero
expect_within 30
expect_out "collective timed out after [0-9.]* s waiting for rank [02] \(host"
expect_out "is the furthest behind|waiting for rank 1 "
expect_out "still waiting for rank"
# The first rank to time out aborts the job, so the other waiting rank may be
# killed before it reports: at least one must report, and every report must
# be a timeout within the bound.
reports=$(sed -n "s/^\[rank [02]\] comm_all_reduce -> \(.*\) after \([0-9.]*\) s$/\1|\2/p" <<<"$out")
if [ -z "$reports" ]; then
  bad "no rank reported how its collective ended"
else
  while IFS='|' read -r status took; do
    if [ "$status" != "timed out" ]; then
      bad "a rank's collective ended with '$status', not a timeout"
    elif [ "$(echo "$took <= $limit" | bc)" != 1 ]; then
      bad "a rank took $took s (limit $limit s)"
    else
      ok "a waiting rank timed out after $took s (limit $limit s)"
    fi
  done <<<"$reports"
fi

# The deterministic all-reduce's all-to-all (both backends) is bounded too.
for backend in ring mpi; do
  run "tree_$backend" 60 "$MPIRUN" -np 3 "$VGPU_BUILD_DIR/vgpu_allreduce_perf" --backend $backend \
    --tree 6 --maxbytes 1M --timeout $timeout_s --sleep-rank 1 --sleep 60
  expect_nonzero
  expect_within $((timeout_s + 10))
  expect_out "collective \(all-to-all\) still waiting"
  expect_out "collective timed out after [0-9.]* s in all-to-all"
done
finish
