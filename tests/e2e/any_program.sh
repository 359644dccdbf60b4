#!/usr/bin/env bash
# any_program.sh: vgpurun runs programs that know nothing of vgpu. Every rank
# gets torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
# MASTER_ADDR, MASTER_PORT) and, on a GPU host, its own CUDA_VISIBLE_DEVICES
# by the binding policy (here on simulated GPUs). The PyTorch DDP script:
# ddp.sh.
source "$(dirname "$0")/lib.sh"
VGPURUN=$VGPU_BUILD_DIR/vgpurun

run "vgpurun -np 3 -- env" 60 "$VGPURUN" -np 3 -- env
expect_rc 0
for v in RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE; do
  got=$(grep -E "^$v=" <<<"$out" | sort | tr '\n' ' ')
  case $v in
    RANK|LOCAL_RANK) want="$v=0 $v=1 $v=2 " ;;
    *) want="$v=3 $v=3 $v=3 " ;;
  esac
  if [ "$got" = "$want" ]; then ok "$v per rank: $got"; else bad "$v: '$got', want '$want'"; fi
done
if [ "$(grep -cE '^MASTER_ADDR=127\.0\.0\.1$' <<<"$out")" = 3 ] &&
   [ "$(grep -E '^MASTER_PORT=[0-9]+$' <<<"$out" | sort -u | wc -l)" = 1 ]; then
  ok "MASTER_ADDR=127.0.0.1 and one MASTER_PORT on every rank"
else
  bad "MASTER_ADDR / MASTER_PORT not the same on every rank"
fi

# The user's own rendezvous wins.
run "MASTER_PORT of the user's" 60 env MASTER_PORT=29999 "$VGPURUN" -np 2 -- sh -c 'echo "port=$MASTER_PORT"'
expect_rc 0
if [ "$(grep -c '^port=29999$' <<<"$out")" = 2 ]; then ok "MASTER_PORT=29999 kept"; else bad "MASTER_PORT overridden"; fi

# GPUs: ranks fill them in order, each sees only its own (by UUID).
run "4 ranks on 2 simulated GPUs" 60 env VGPU_SIM_GPUS=2x80G "$VGPURUN" -np 4 -- \
  sh -c 'echo "rank $RANK sees $CUDA_VISIBLE_DEVICES"'
expect_rc 0
g0=GPU-5117a000-0000-4000-8000-000000000000 g1=GPU-5117a000-0000-4000-8000-000000000001
for r in 0 1; do expect_out "^rank $r sees $g0\$"; done
for r in 2 3; do expect_out "^rank $r sees $g1\$"; done
run "--ranks-per-gpu 1 on 2 GPUs, 4 ranks" 60 env VGPU_SIM_GPUS=2x80G "$VGPURUN" -np 4 \
  --ranks-per-gpu 1 -- sh -c 'echo "rank $RANK sees $CUDA_VISIBLE_DEVICES"'
expect_nonzero
expect_out 'vgpurun-rank: rank [0-9]: .*'
run "no GPU: CUDA_VISIBLE_DEVICES untouched" 60 "$VGPURUN" -np 2 -- sh -c 'echo "cvd=${CUDA_VISIBLE_DEVICES-unset}"'
expect_rc 0
if [ "$(grep -c '^cvd=unset$' <<<"$out")" = 2 ]; then ok "no CUDA_VISIBLE_DEVICES without GPUs"; else bad "CUDA_VISIBLE_DEVICES set without GPUs"; fi

# A host name that does not resolve is said in one line, before mpirun (which
# would try ssh and print about 30 lines of reports), for -H and hostfiles.
run "a host that does not resolve (-H)" 30 "$VGPURUN" -np 2 -H localhost:1,nosuchhost.invalid:1 -- true
expect_rc 2
expect_out "^vgpurun: -H: host 'nosuchhost.invalid' does not resolve"
if [ "$(grep -c . <<<"$out")" = 1 ]; then ok "one line"; else bad "$(grep -c . <<<"$out") lines"; fi
expect_within 5
printf 'localhost slots=1\n# a comment\n127.0.0.1 slots=1\nnode-typo.invalid slots=2\n' >"$WORK/hosts"
run "a host that does not resolve (hostfile)" 30 "$VGPURUN" -np 2 --hostfile "$WORK/hosts" -- true
expect_rc 2
expect_out "host 'node-typo.invalid' does not resolve"

# A host without ssh or rsh (a container): Open MPI 4's mpirun refuses to
# start even for local ranks, unless told of an agent it will not use; both
# launchers tell it. Shown for real with ssh hidden in a mount namespace.
ssh_path=$(command -v ssh || true)
if [ "$(id -u)" = 0 ] && [ -n "$ssh_path" ] && ! command -v rsh >/dev/null && command -v unshare >/dev/null; then
  for launcher in "$VGPURUN -np 2 --" "$MPIRUN -np 2"; do
    run "no ssh on the host: ${launcher%% *}" 60 env -u OMPI_MCA_plm_rsh_agent unshare -m sh -c \
      "mount --bind /dev/null '$ssh_path' && exec $launcher sh -c 'echo rank \${OMPI_COMM_WORLD_RANK} ran'"
    expect_rc 0
    expect_out '^rank 1 ran$'
  done
  # The control: plain mpirun there fails (the fix is the launchers').
  run "no ssh on the host: plain mpirun" 60 env -u OMPI_MCA_plm_rsh_agent unshare -m sh -c \
    "mount --bind /dev/null '$ssh_path' && exec mpirun --allow-run-as-root -np 1 true"
  expect_nonzero
else
  echo "--- not run: hiding ssh needs root, unshare, ssh and no rsh"
fi

# vgpu's NCCL goes first on the loader's path exactly where a host's ranks
# share a GPU (and the simulated CUDA runtime with it on simulated GPUs);
# VGPU_NCCL=vgpu forces it, VGPU_NCCL=real keeps NCCL's own.
if [ -e "$VGPU_BUILD_DIR/vnccl/libnccl.so.2" ]; then
  front="$VGPU_BUILD_DIR/vnccl:$VGPU_BUILD_DIR/cudart_sim"
  asan="" # a sanitized build preloads the ASan runtime before vgpu's NCCL
  grep -q '^VGPU_SANITIZE:BOOL=ON' "$VGPU_BUILD_DIR/CMakeCache.txt" && asan="$(gcc -print-file-name=libasan.so):"
  show='echo "path=$LD_LIBRARY_PATH preload=$LD_PRELOAD"'
  for case in "1x80G auto 2 yes" "2x80G auto 2 no" "2x80G auto 3 yes" "1x80G real 2 no" "2x80G vgpu 2 yes" "1x80G auto 1 no"; do
    read -r gpus mode np want <<<"$case"
    run "VGPU_SIM_GPUS=$gpus VGPU_NCCL=$mode -np $np" 60 env VGPU_SIM_GPUS="$gpus" VGPU_NCCL="$mode" \
      LD_LIBRARY_PATH=/opt/user/lib LD_PRELOAD=/opt/user/pre.so "$VGPURUN" -np "$np" -- sh -c "$show"
    expect_rc 0
    if [ "$want" = yes ]; then
      expected="path=$front:/opt/user/lib preload=$asan$VGPU_BUILD_DIR/vnccl/libnccl.so.2:/opt/user/pre.so"
    else expected="path=/opt/user/lib preload=/opt/user/pre.so"; fi
    got=$(grep -c -x -F "$expected" <<<"$out")
    if [ "$got" = "$np" ]; then ok "$gpus, VGPU_NCCL=$mode, $np ranks: $expected"
    else bad "$gpus, VGPU_NCCL=$mode, $np ranks: want '$expected' on every rank"; fi
  done
else
  echo "--- not run: vgpu's NCCL is not built here (no nccl.h)"
fi

finish
