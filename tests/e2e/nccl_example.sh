#!/usr/bin/env bash
# nccl_example.sh: an unmodified MPI + NCCL program on vgpu's libnccl.so.2
# (issue 44). worker/examples/nccl_allreduce.c is built against the real
# NCCL and the shared CUDA runtime; with LD_LIBRARY_PATH putting vgpu's
# libnccl.so.2 and the simulated libcudart.so.13 first, scripts/mpirun.sh
# runs it on 4 ranks and on 2 of one (simulated) GPU: the all-reduce is exact,
# the loader took vgpu's libraries (ldd, and LD_DEBUG=libs on every rank of
# the 2-rank run), and nothing is left in shared memory. Then as the docs
# launch it: through vgpurun, which puts both libraries first by itself.
source "$(dirname "$0")/lib.sh"
PROG=$VGPU_BUILD_DIR/vgpu_example_nccl_allreduce
VNCCL=$VGPU_BUILD_DIR/vnccl/libnccl.so.2
SIMRT=$VGPU_BUILD_DIR/cudart_sim/libcudart.so.13
[ -x "$PROG" ] || skip "$PROG is not built (NCCL not found: VGPU_HAVE_NCCL is off)"
[ -e "$VNCCL" ] || skip "vgpu's $VNCCL is not built"
[ -e "$SIMRT" ] || skip "the simulated CUDA runtime $SIMRT is not built"

# resolved LIB: where the loader finds LIB for the example (ldd).
resolved() { awk -v lib="$1" '$1 == lib { print $3 }' <<<"$out"; }

# Without the path, the example is a program of the real NCCL's.
run "ldd, the system's path" 30 env -u LD_LIBRARY_PATH ldd "$PROG"
got=$(resolved libnccl.so.2)
if [ -n "$got" ] && [ "$(readlink -f "$got")" != "$(readlink -f "$VNCCL")" ]; then
  ok "linked against the real NCCL ($got)"
else
  bad "libnccl.so.2 resolves to '$got' without LD_LIBRARY_PATH"
fi

export LD_LIBRARY_PATH=$VGPU_BUILD_DIR/cudart_sim:$VGPU_BUILD_DIR/vnccl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
run "ldd, vgpu's path first" 30 ldd "$PROG"
for pair in "libnccl.so.2 $VNCCL" "libcudart.so.13 $SIMRT"; do
  set -- $pair
  got=$(resolved "$1")
  if [ "$got" = "$2" ]; then ok "$1 => $got"; else bad "$1 => '$got', want $2"; fi
done

run "4 ranks" 120 "$MPIRUN" -np 4 "$PROG"
expect_rc 0
expect_out '^nccl_allreduce: 4 ranks, 1048576 floats: ok$'
expect_no_shm

# The device collectives' protocol under the library (VGPU_DEVCOLL=1: on the
# simulated runtime's memory, the calling thread), whose INFO line says so;
# and the rounds of 1 KiB areas.
run "4 ranks, device collectives" 120 env VGPU_DEVCOLL=1 VGPU_DEVCOLL_AREA_KB=1 NCCL_DEBUG=INFO \
  "$MPIRUN" -np 4 "$PROG" 100003
expect_rc 0
expect_out '^nccl_allreduce: 4 ranks, 100003 floats: ok$'
expect_out '^vgpu-nccl: INFO 4 ranks share one device: collectives on it \(sim\)$'
expect_no_shm

# Every rank's loader says which libnccl.so.2 it initialized.
run "2 ranks, LD_DEBUG=libs" 120 "$MPIRUN" -np 2 env LD_DEBUG=libs "$PROG" 65536
expect_rc 0
expect_out '^nccl_allreduce: 2 ranks, 65536 floats: ok$'
inits=$(grep -cF "calling init: $VNCCL" <<<"$out")
if [ "$inits" = 2 ]; then ok "both ranks initialized $VNCCL"; else bad "$inits ranks initialized $VNCCL, want 2"; fi
inits=$(grep -cF "calling init: $SIMRT" <<<"$out")
if [ "$inits" = 2 ]; then ok "both ranks initialized $SIMRT"; else bad "$inits ranks initialized $SIMRT, want 2"; fi
expect_no_out 'calling init: .*/(usr|opt)/.*libnccl\.so'
expect_no_out 'calling init: .*/usr/local/cuda.*/libcudart\.so'
expect_no_shm

# As README and docs/LIBRARY.md launch it: vgpurun puts both libraries first
# by itself where the ranks share a (simulated) GPU.
unset LD_LIBRARY_PATH
run "vgpurun -np 4 on one simulated GPU" 120 env VGPU_SIM_GPUS=1x80G \
  "$VGPU_BUILD_DIR/vgpurun" -np 4 -- "$PROG"
expect_rc 0
expect_out '^nccl_allreduce: 4 ranks, 1048576 floats: ok$'
expect_no_shm
run "vgpu_nccl_perf, as docs/LIBRARY.md runs it" 120 env VGPU_SIM_GPUS=1x80G \
  "$VGPU_BUILD_DIR/vgpurun" -np 4 -- "$VGPU_BUILD_DIR/vgpu_nccl_perf" -b 8 -e 1M -f 8
expect_rc 0
expect_out '^# every result checked: ok$'
rows=$(grep -cE '^ +[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +0$' <<<"$out")
if [ "$rows" = 6 ]; then ok "6 sizes, 8 B to 256 KiB, none wrong"; else bad "$rows rows of 6 with #wrong 0"; fi
expect_no_shm
finish
