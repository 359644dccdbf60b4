#!/usr/bin/env bash
# hung_rank.sh: kill -STOP one rank mid-training: the others notice through
# the collective timeout (comm.timeout_s = 4): a warning at half of it that
# names the rank not yet arrived, then the job ends with a message naming the
# stalled rank, within the timeout plus a margin; nothing is left behind and
# the last finished checkpoint resumes.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/faults_lib.sh"
timeout_s=4

start_job hung 4 --set comm.timeout_s=$timeout_s
if ! wait_for_checkpoints 2 30; then
  out=$(cat "$job_out"); bad "no checkpoint within 30 s"; finish; exit
fi
victim=$(rank_pid 2)
if [ -z "$victim" ]; then
  out=$(cat "$job_out"); bad "rank 2 not found"; finish; exit
fi
mark
kill -STOP "$victim"
wait_job 25
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
start_job hung_det 4 --set comm.timeout_s=$timeout_s --set train.deterministic=true
if ! wait_for_checkpoints 2 30; then
  out=$(cat "$job_out"); bad "deterministic: no checkpoint within 30 s"; finish; exit
fi
victim=$(rank_pid 1)
if [ -z "$victim" ]; then
  out=$(cat "$job_out"); bad "deterministic: rank 1 not found"; finish; exit
fi
mark
kill -STOP "$victim"
wait_job 25
expect_nonzero
expect_within $((timeout_s + 6))
expect_out "still waiting .*after [0-9.]+ s \(timeout $timeout_s"
expect_out "timed out after [0-9.]+ s"
expect_nothing_left
expect_checkpoints_intact
finish
