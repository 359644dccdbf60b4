#!/usr/bin/env bash
# hung_rank.sh: kill -STOP one rank mid-training: the others notice through
# the collective timeout (comm.timeout_s = 4): a warning at half of it that
# names the rank not yet arrived, then the job ends with a message naming the
# stalled rank, within the timeout plus a margin; nothing is left behind and
# the last finished checkpoint resumes.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/faults_lib.sh"
timeout_s=4

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
expect_within $((timeout_s + 6))
expect_out "still waiting for rank 2 .*after [0-9.]+ s \(timeout $timeout_s"
expect_out "collective timed out after [0-9.]+ s waiting for rank (2 |[0-9]+ .*rank 2 .*furthest behind)"
# One warning per waiting rank, not one per poll.
warnings=$(grep -c 'still waiting for rank' <<<"$out")
if [ "$warnings" -le 3 ]; then ok "$warnings warning(s), at most one per waiting rank"; else bad "$warnings warnings"; fi
expect_nothing_left
expect_checkpoints_intact

# Deterministic mode exchanges micro-batch gradients by all-to-all: that wait
# is bounded too.
stop_rank_mid_training hung_det 1 --set train.deterministic=true
expect_nonzero
expect_within $((timeout_s + 6))
expect_out "still waiting .*after [0-9.]+ s \(timeout $timeout_s"
expect_out "timed out after [0-9.]+ s"
expect_nothing_left
expect_checkpoints_intact
finish
