#!/usr/bin/env bash
# comm_timeout.sh: a rank that never enters a collective must not hang the
# others: with comm timeout T they end after T s (within a 1.5 s margin, so
# that a wait twice as long as its bound fails), with a message that names
# the rank they waited for and the time they waited, and the job is aborted.
# The same for the deterministic all-reduce's all-to-all on the ring and mpi
# backends.
source "$(dirname "$0")/lib.sh"
timeout_s=3
limit=$(echo "$timeout_s + 1.5" | bc)

# expect_waited_about: every "timed out after X s" line says T <= X <= T + 1.5.
expect_waited_about() {
  local said
  said=$(grep -oE 'timed out after [0-9.]+ s' <<<"$out" | grep -oE '[0-9.]+' | head -5)
  if [ -z "$said" ]; then bad "no 'timed out after X s' line"; return; fi
  for x in $said; do
    if [ "$(echo "$x >= $timeout_s && $x <= $limit" | bc)" = 1 ]; then
      ok "said it waited $x s (bound $timeout_s s)"
    else
      bad "said it waited $x s: not within [$timeout_s, $limit] s"
    fi
  done
}

# Each all-reduce algorithm: the latency path (one-shot: every rank waits for
# every other, so the sleeper itself is named) and the ring (neighbours wait
# for neighbours: the one waited for, and the one furthest behind).
for algo in auto ring; do
  run "ring_all_reduce_$algo" 60 env VGPU_RING_ALGO=$algo "$MPIRUN" -np 3 \
    "$VGPU_BUILD_DIR/test_comm_collectives" --backend ring --timeout $timeout_s --sleep-rank 1
  expect_nonzero
  expect_within 30
  if [ $algo = auto ]; then
    expect_out "collective timed out after [0-9.]* s waiting for rank 1 \(host"
    expect_no_out "waiting for rank [02] "
  else
    # Ranks 0 and 2 time out within a few milliseconds of each other, and
    # the first to exit has the job killed: either may be the one to report,
    # and each names the rank it waits for, its left neighbour in the ring.
    named=$(sed -n 's/^\[rank \([0-9]\)@[^]]*\] error: collective timed out after [0-9.]* s waiting for rank \([0-9]\) (host.*/\1 \2/p' <<<"$out")
    if [ -z "$named" ]; then bad "no rank said whom it timed out waiting for"; fi
    while read -r r w; do
      [ -n "$r" ] || continue
      if [ "$w" = $(((r + 2) % 3)) ]; then ok "rank $r timed out waiting for rank $w, its left neighbour"
      else bad "rank $r timed out waiting for rank $w, not its left neighbour $(((r + 2) % 3))"; fi
    done <<<"$named"
    expect_out "is the furthest behind|waiting for rank 1 "
  fi
  expect_out "still waiting for rank [0-9] \(host [^)]*\) after 1\.[5-9] s \(timeout $timeout_s\.0 s\)"
  expect_waited_about
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
      elif [ "$(echo "$took >= $timeout_s && $took <= $limit" | bc)" != 1 ]; then
        bad "a rank took $took s (bound $timeout_s s, limit $limit s)"
      else
        ok "a waiting rank timed out after $took s (bound $timeout_s s, limit $limit s)"
      fi
    done <<<"$reports"
  fi
done

# The device collectives (VGPU_DEVCOLL=1: their protocol on CPU devices):
# the waits on the device are bounded by the same timeout, and name the rank.
run "devcoll_all_reduce" 60 env VGPU_DEVCOLL=1 "$MPIRUN" -np 3 \
  "$VGPU_BUILD_DIR/test_comm_collectives" --backend ring --timeout $timeout_s --sleep-rank 1
expect_nonzero
expect_within 30
expect_out "error: device collective [0-9]+: rank 1 did not reach the collective within the timeout"
# The first rank to time out aborts the job; the other waiting rank's
# watchdog may see it go before its own wait times out, and then reports a
# communication failure (a peer that exited), no sooner than the timeout.
reports=$(sed -n "s/^\[rank [02]\] comm_all_reduce -> \(.*\) after \([0-9.]*\) s$/\1|\2/p" <<<"$out")
if ! grep -q '^timed out|' <<<"$reports"; then bad "no rank reported that its collective timed out"; fi
while IFS='|' read -r status took; do
  [ -n "$status" ] || continue
  in_bound=$(echo "$took >= $timeout_s && $took <= $limit" | bc)
  if [ "$in_bound" = 1 ] && { [ "$status" = "timed out" ] || [ "$status" = "communication failure" ]; }; then
    ok "a waiting rank's collective ended ($status) after $took s on the device collectives (bound $timeout_s s)"
  else
    bad "a rank's collective ended with '$status' after $took s (bound $timeout_s s, limit $limit s)"
  fi
done <<<"$reports"

# The hierarchical all-reduce (2 hosts of 2 ranks: rank q on host q % 2):
# its sub-rings name ranks as the job does. Rank 2 sleeps; rank 0 (its host
# neighbour) and rank 3 (the ring between hosts of local index 1) wait for it.
run "ring_all_reduce_hierarchical" 60 "$MPIRUN" -np 4 \
  "$VGPU_BUILD_DIR/test_comm_collectives" --backend ring --fake-hosts 2 --timeout $timeout_s --sleep-rank 2
expect_nonzero
expect_within 30
expect_out "^\[rank [03]@[^]]*\] error: collective timed out after [0-9.]* s waiting for rank 2 \(host"
expect_no_out "rank [03]@[^]]*\] error: collective timed out after [0-9.]* s waiting for rank [013] "
expect_out "ring_sub.c"
expect_waited_about

# The deterministic all-reduce's all-to-all (both backends) is bounded too.
for backend in ring mpi; do
  run "tree_$backend" 60 "$MPIRUN" -np 3 "$VGPU_BUILD_DIR/vgpu_allreduce_perf" --backend $backend \
    --tree 6 --maxbytes 1M --timeout $timeout_s --sleep-rank 1 --sleep 60
  expect_nonzero
  expect_within $((timeout_s + 10))
  expect_out "collective \(all-to-all\) still waiting"
  expect_out "collective timed out after [0-9.]* s in all-to-all"
  expect_waited_about
done
finish
