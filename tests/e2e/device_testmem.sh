#!/usr/bin/env bash
# device_testmem.sh: the runtime on a device backend it does not name
# (issue 45): the test-only device of launcher/device/testmem/ (host memory
# without a host view), selected by VGPU_TEST_DEVICE=testmem. Discovery,
# binding, the job table and the backend choice ask the device what it is
# (vgpu_train --plan's table); the runtime opens it and the ring and mpi
# backends reach its memory through copies, as on a GPU (tests/api_comm.c's
# two jobs side by side: all-reduce and broadcast through the public API).
# Its math is not there (the collectives need none), so no training runs.
source "$(dirname "$0")/lib.sh"
export VGPU_TEST_DEVICE=testmem
cfg="$CONFIGS/default.ini"

run "plan on the test device, 4 ranks" 60 "$MPIRUN" -np 4 "$TRAIN" "$cfg" --plan
if grep -q 'cpu0 ' <<<"$out" && ! grep -q 'testmem0 ' <<<"$out"; then
  skip "this build has no test-only device backends (VGPU_TESTS=OFF)"
fi
expect_rc 0
expect_out '^vgpu: no GPU: 4 CPU-simulated virtual GPUs \(4 ranks, 1 host; BLAS: [0-9]+ threads?\)'
expect_out '^vgpu: collectives: ring \(this build has no NCCL backend|^vgpu: collectives: ring \(not every rank has a CUDA device'
expect_out '^ +3 +[^ ]+ +3 +testmem0 host memory \(test device\) +vgpu3 +[0-9.]+ [MG]iB$'
# Deterministic mode's all-to-all needs host-addressable memory on the ring:
# memory without a host view takes the mpi backend, as GPUs do.
run "deterministic plan on the test device" 60 "$MPIRUN" -np 4 "$TRAIN" "$cfg" --plan \
  --set train.deterministic=true
expect_rc 0
expect_out '^vgpu: collectives: mpi \(deterministic mode on GPUs'

PROG=$VGPU_BUILD_DIR/test_api_comm
run "two vgpu jobs on the test device, ring" 120 "$MPIRUN" -np 4 "$PROG" split
expect_rc 0
expect_out '^api_comm: 4 ranks as two vgpu jobs of 2 and 2 \(ring\): ok$'
run "two vgpu jobs on the test device, mpi" 120 env VGPU_BACKEND=mpi "$MPIRUN" -np 5 "$PROG" split
expect_rc 0
expect_out '^api_comm: 5 ranks as two vgpu jobs of 3 and 2 \(mpi\): ok$'
expect_no_shm
finish
