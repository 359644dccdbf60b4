#!/usr/bin/env bash
# runtime_cap.sh: one rank going over its memory cap ends the whole job
# promptly, with a message that names that rank; nothing is left behind.
source "$(dirname "$0")/lib.sh"

run "rank 2 exceeds its cap" 60 "$MPIRUN" -np 4 "$VGPU_BUILD_DIR/test_runtime_cap" 2
expect_nonzero
expect_within 10
expect_out '\[rank 2@[^]]+\] error: device memory cap exceeded: requested 8.0 MiB, in use 10.0 MiB of 16.0 MiB \(virtual GPU 2 on physical device cpu0\)'
expect_no_out 'no rank exceeded'
expect_no_shm

run "no rank exceeds" 60 "$MPIRUN" -np 4 "$VGPU_BUILD_DIR/test_runtime_cap" 99
expect_rc 0
expect_out 'no rank exceeded its cap'
expect_out 'vgpu: no GPU: 4 CPU-simulated virtual GPUs'
finish
