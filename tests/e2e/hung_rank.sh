#!/usr/bin/env bash
# hung_rank.sh: kill -STOP one rank mid-training: the others notice through
# the collective timeout (comm.timeout_s = 4): a warning at half of it that
# names the rank not yet arrived, then the job ends with a message naming the
# stalled rank and the time waited (the timeout, give or take a poll), within
# the timeout plus 2.5 s (a wait twice its bound fails), and the flight
# recorder's verdict names it alone and the collective (vgpu-flight reads the same from the
# records); nothing is left behind and the last finished checkpoint resumes. The whole job stopped for twice the
# timeout (scontrol suspend) is not a fault: resumed, it finishes.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/faults_lib.sh"
timeout_s=4
# expect_waited_about: each "timed out after X s" says T <= X <= T + 1.
expect_waited_about() {
  local x said
  said=$(grep -oE 'timed out after [0-9.]+ s' <<<"$out" | grep -oE '[0-9.]+')
  if [ -z "$said" ]; then bad "no 'timed out after X s' line"; return; fi
  for x in $said; do
    if [ "$(echo "$x >= $timeout_s && $x <= $timeout_s + 1" | bc)" = 1 ]; then
      ok "said it waited $x s (timeout $timeout_s s)"
    else bad "said it waited $x s (timeout $timeout_s s)"; fi
  done
}

# stop_rank_mid_training NAME RANK ARGS...: starts the job, waits for two
# checkpoints, stops RANK, waits for the job to end (exits on a set-up failure).
stop_rank_mid_training() {
  local name=$1 rank=$2
  shift 2
  start_job "$name" 4 --set comm.timeout_s=$timeout_s "$@"
  if ! wait_for_checkpoints 2 30; then
    out=$(cat "$job_out"); bad "$name: no checkpoint within 30 s"; finish; exit
  fi
  victim=$(rank_pid "$rank")
  if [ -z "$victim" ]; then
    out=$(cat "$job_out"); bad "$name: rank $rank not found"; finish; exit
  fi
  mark
  kill -STOP "$victim"
  wait_job 25
}

stop_rank_mid_training hung 2
expect_nonzero
expect_within "$timeout_s + 2.5"
expect_out "still waiting for rank 2 .*after [0-9.]+ s \(timeout $timeout_s"
expect_out "collective timed out after [0-9.]+ s waiting for rank (2 |[0-9]+ .*rank 2 .*furthest behind)"
expect_waited_about
# One warning per waiting rank, not one per poll.
warnings=$(grep -c 'still waiting for rank' <<<"$out")
if [ "$warnings" -le 3 ]; then ok "$warnings warning(s), at most one per waiting rank"; else bad "$warnings warnings"; fi
expect_flight_verdict 2 stopped
expect_nothing_left
expect_checkpoints_intact

# Deterministic mode exchanges micro-batch gradients by all-to-all: that wait
# is bounded too.
stop_rank_mid_training hung_det 1 --set train.deterministic=true
expect_nonzero
expect_within "$timeout_s + 2.5"
expect_out "still waiting .*after [0-9.]+ s \(timeout $timeout_s"
expect_out "timed out after [0-9.]+ s"
expect_waited_about
expect_flight_verdict 1 stopped
expect_nothing_left
expect_checkpoints_intact

# Every process of the job stopped and resumed, as `scontrol suspend` and
# `resume` do: the time each rank spent stopped is not its peers' delay.
# Twice, since where the stop catches a rank is a matter of chance.
# (20000 steps: long enough to be running at both stops, short enough to end
# within the minute waited on a loaded 2-core machine, where 60000 did not)
start_job suspended 4 --set comm.timeout_s=$timeout_s --set train.max_steps=20000
if wait_for_checkpoints 2 30; then
  pids=$(pgrep -f -- "$ckdir" | tr '\n' ' ')
  for cycle in 1 2; do
    # Rank 0 a moment before the rest, so that the others are inside a wait
    # for it when they stop (a suspend catches them anywhere).
    kill -STOP "$(rank_pid 0)"
    sleep 0.3
    kill -STOP $pids
    sleep $((2 * timeout_s))
    mark
    kill -CONT $pids
    sleep 1
  done
  wait_job 60
  expect_rc 0
  expect_out 'status=ok$'
  expect_no_out 'still waiting|timed out|flight recorder'
else
  out=$(cat "$job_out"); bad "suspended: no checkpoint within 30 s"
fi
finish
