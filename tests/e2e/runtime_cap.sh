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

# The same through libvgpu's public API (the program the GPU check runs):
# 40 MiB of a 64 MiB cap each, rank 2 asks for 32 more.
run "public API: rank 2 exceeds its cap" 60 "$MPIRUN" -np 4 "$VGPU_BUILD_DIR/test_api_cap" 2 --set devices.kind=cpu
expect_nonzero
expect_within 10
expect_out '\[rank 2@[^]]+\] error: device memory cap exceeded: requested 32.0 MiB, in use 40.0 MiB of 64.0 MiB \(virtual GPU 2 on physical device cpu0\)'
expect_out '\[rank 2\] test_api_cap: vgpu_malloc returned: '
expect_no_out 'no rank exceeded'
run "public API: no rank exceeds" 60 "$MPIRUN" -np 2 "$VGPU_BUILD_DIR/test_api_cap" 99 --set devices.kind=cpu
expect_rc 0
expect_out 'test_api_cap: no rank exceeded its cap'
finish
