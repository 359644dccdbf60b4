#!/usr/bin/env bash
# dead_rank.sh: kill -9 one rank mid-training: every rank goes and the
# launcher exits non-zero within 10 s, saying a rank was killed by signal 9
# (mpirun runs with -q on one host; VGPU_MPIRUN_REPORT=1 keeps its report,
# which names the rank: tests/cluster/vgpurun_local.sh checks both), and the
# flight recorder's verdict names it and its collective; nothing
# of the job is left (processes, /dev/shm, temp files) and the last finished
# checkpoint resumes.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/faults_lib.sh"

start_job dead 4
if ! wait_for_checkpoints 2 30; then
  out=$(cat "$job_out"); bad "no checkpoint within 30 s"; finish; exit
fi
victim=$(rank_pid 2)
if [ -z "$victim" ]; then
  out=$(cat "$job_out"); bad "rank 2 not found"; finish; exit
fi
mark
kill -9 "$victim"
wait_job 30
expect_nonzero
expect_within 10
expect_out '^mpirun.sh: a rank was killed by signal 9 \(KILL\) and mpirun ended the job'
# mpirun stops the others with SIGTERM: they read the dead rank's ring.
expect_flight_verdict 2 dead
expect_nothing_left
expect_checkpoints_intact
finish
