#!/usr/bin/env bash
# api_comm.sh: libvgpu joins a communicator of the program's (MPI_COMM_WORLD
# split in two: two vgpu jobs side by side, the program's own world traffic
# between vgpu's calls), and vgpu_init's waits are bounded: a rank that comes
# too late makes the others return VGPU_ETIMEOUT, said, and the job ends
# instead of hanging. And the API beyond NCCL's calls, as vgpu_train uses it
# (tests/api_trainer.c), on 1-4 ranks and both host backends.
source "$(dirname "$0")/lib.sh"
PROG=$VGPU_BUILD_DIR/test_api_comm

run "split world, 4 ranks" 120 "$MPIRUN" -np 4 "$PROG" split
expect_rc 0
expect_out '^api_comm: 4 ranks as two vgpu jobs of 2 and 2 \(ring\): ok$'
run "split world, 5 ranks" 120 "$MPIRUN" -np 5 "$PROG" split
expect_rc 0
expect_out '^api_comm: 5 ranks as two vgpu jobs of 3 and 2 \(ring\): ok$'
run "split world, mpi backend" 120 env VGPU_BACKEND=mpi "$MPIRUN" -np 4 "$PROG" split
expect_rc 0
expect_out '^api_comm: 4 ranks as two vgpu jobs of 2 and 2 \(mpi\): ok$'

# Rank 2 calls vgpu_init 30 s late; the bound is 2 s.
run "a rank 30 s late (bound 2 s)" 60 env VGPU_COMM_TIMEOUT_S=2 "$MPIRUN" -np 3 "$PROG" late 30
expect_nonzero
for r in 0 1; do
  expect_out "^api_comm: rank $r: vgpu_init returned -[0-9]+ \\(.*(time|timed)"
  expect_out "^api_comm: rank $r: vgpu_init again returned -[0-9]+ "
done
expect_out 'waited [0-9.]+ s for the other ranks of the communicator to call vgpu_init'
expect_within 25
expect_no_shm

TRAINER=$VGPU_BUILD_DIR/test_api_trainer
for np in 1 3 4; do
  run "the trainer's API, $np ranks" 120 "$MPIRUN" -np $np "$TRAINER"
  expect_rc 0
  expect_out "^api_trainer: $np ranks \\(cpu, ring\\): [0-9]+ checks a rank, 0 failed\$"
done
run "the trainer's API, mpi backend" 120 env VGPU_BACKEND=mpi "$MPIRUN" -np 3 "$TRAINER"
expect_rc 0
expect_out '^api_trainer: 3 ranks \(cpu, mpi\): [0-9]+ checks a rank, 0 failed$'
run "vgpu_open with a need no cap meets" 120 "$MPIRUN" -np 2 "$TRAINER" too-small
expect_rc 0
expect_out '^api_trainer: rank 0: vgpu_open returned -1002 '
expect_out '^api_trainer: rank 1: vgpu_open returned -1002 '
expect_out 'is below the .* this job needs'
finish
