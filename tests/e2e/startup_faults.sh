#!/usr/bin/env bash
# startup_faults.sh: faults during start-up, where no collective timeout
# watches yet. A rank killed right after launch or at a start-up stage (the
# stage widened by the test pause) ends the job; a rank stopped right after
# launch, or at a stage, ends it within the start-up bound (comm.timeout_s,
# here VGPU_COMM_TIMEOUT_S=4, which also bounds MPI's own start) with a line
# naming the stage that did not finish. Nothing is left behind in any case.
# (Stop signals at start-up, which must exit 75, are in preempt.sh.)
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/faults_lib.sh"
bound=4
export VGPU_COMM_TIMEOUT_S=$bound

# wait_rank_pid R: the pid of rank R as soon as it exists (up to 30 s).
wait_rank_pid() {
  local p i
  for i in $(seq 3000); do
    p=$(rank_pid "$1")
    [ -n "$p" ] && { echo "$p"; return; }
    sleep 0.01
  done
}

# wait_pause STAGE: until rank 0 says it paused there (up to 30 s).
wait_pause() {
  for _ in $(seq 300); do grep -q "test pause at $1" "$job_out" && return 0; sleep 0.1; done
  return 1
}

# Killed right after launch (inside or before MPI_Init_thread).
start_job killed-at-launch 4
victim=$(wait_rank_pid 2)
mark
kill -9 "$victim"
wait_job 30
expect_nonzero
expect_within 15
expect_nothing_left

# Killed at each start-up stage.
for stage in data open warmup; do
  VGPU_TEST_START_PAUSE=$stage:2 start_job "killed-at-$stage" 4
  if ! wait_pause "$stage"; then out=$(cat "$job_out"); bad "$stage: no pause"; continue; fi
  mark
  kill -9 "$(rank_pid 2)"
  wait_job 30
  expect_nonzero
  expect_within 10
  expect_out "rank was killed by signal 9|killed|exited on signal 9"
  expect_nothing_left
done

# Stopped right after launch: the others wait in MPI's start or in the first
# exchanges; the start-up bound ends the job and says where.
start_job stopped-at-launch 4
victim=$(wait_rank_pid 2)
mark
kill -STOP "$victim"
wait_job 30
expect_nonzero
expect_within $((bound + 8))
expect_out "start-up did not finish: [0-9.]+ s in '[^']+' \(bound $bound.0 s"
expect_nothing_left

# Stopped at a stage after the hosts have joined: the line names the rank.
for stage in data open; do
  VGPU_TEST_START_PAUSE=$stage:1 start_job "stopped-at-$stage" 4
  if ! wait_pause "$stage"; then out=$(cat "$job_out"); bad "$stage: no pause"; continue; fi
  mark
  kill -STOP "$(rank_pid 2)"
  wait_job 30
  expect_nonzero
  expect_within $((bound + 8))
  expect_out "(start-up did not finish|timed out after [0-9.]+ s waiting for).*rank 2 \(host [^)]+\)( is stopped|:)"
  expect_nothing_left
done
# An mpirun that outlives its ranks (Open MPI can hang so when a rank dies
# inside MPI_Init): a stand-in mpirun whose one child ends, and which then
# sleeps; scripts/mpirun.sh and vgpurun end it after VGPU_MPIRUN_ORPHAN_S and
# say so. Its child lives 1.5 s: the watchers poll every 0.25 s from their
# own start, which a busy machine delays (a child of 0.3 s ended unseen
# once in six runs beside two busy loops, and mpirun.sh then waited on).
mkdir -p "$WORK/fakebin"
# (its name keeps $WORK, so that the clean-up finds it if the test fails)
printf '#!/bin/bash\nsleep 1.5 &\nwait\nexec -a "$0 (hung)" sleep 600\n' >"$WORK/fakebin/mpirun"
chmod +x "$WORK/fakebin/mpirun"
run "an mpirun that hangs after its ranks" 20 env PATH="$WORK/fakebin:$PATH" VGPU_MPIRUN_ORPHAN_S=1 \
  "$MPIRUN" -np 2 true
expect_nonzero
expect_within 5
expect_out '^mpirun.sh: mpirun is still running 1 s after its last rank ended: ending it \(an Open MPI hang\)$'
expect_no_out 'a rank was killed by signal'
run "the same under vgpurun" 20 env PATH="$WORK/fakebin:$PATH" VGPU_MPIRUN_ORPHAN_S=1 \
  "$VGPU_BUILD_DIR/vgpurun" -np 2 -- true
expect_nonzero
expect_within 5
expect_out '^vgpurun: mpirun is still running 1 s after its last rank ended: ending it \(an Open MPI hang\)$'
expect_no_out 'a rank was killed by signal'
finish
