#!/usr/bin/env bash
# gpu_sim.sh: the GPU decisions on simulated topologies (VGPU_SIM_GPUS, the
# driver layer's simulated side), checked through `vgpu_train --plan`'s job
# table or its error: one GPU shared, one GPU a rank (NCCL), two hosts with
# per-task CUDA_VISIBLE_DEVICES (bound by UUID, not all "GPU 0"), MIG
# instances, EXCLUSIVE_PROCESS with and without MPS, an MPS memory limit,
# PROHIBITED and failing GPUs, no driver. A simulated run trains on CPU math
# and gives the CPU run's parameters bit for bit.
source "$(dirname "$0")/lib.sh"
# The job table wraps a long line at 79 columns, the rest indented under its
# text ("      "): the checks read each such line whole.
eval "lib_run() $(declare -f run | tail -n +2)"
run() { lib_run "$@"; raw=$out; out=$(sed -e ':a' -e 'N' -e '$!ba' -e 's/\n      \([^ .]\)/ \1/g' <<<"$out"); }
cfg="$CONFIGS/default.ini"
plan() { run "$1" 60 env "${@:2}" "$MPIRUN" -np "$NP" "$TRAIN" "$cfg" --plan; }
# Whether this build has CUDA (cudaGetDeviceCount) or NCCL (ncclGetVersion)
# inside libvgpu.so (local symbols: only vgpu_* are exported).
# (nm read whole: grep -q's early exit would fail the pipeline under pipefail.)
built_with() { grep -qE " [tT] $1\$" <<<"$(nm "$VGPU_BUILD_DIR/libvgpu.so" 2>/dev/null)"; }

# The per-task placement of the Planning example (docs/CLUSTER.md); and the same with
# MIG instances, one a rank.
per_task="$VGPU_SOURCE_DIR/tests/e2e/per_task_example.sh"
wrapper="$WORK/per_task_mig.sh"
cat >"$wrapper" <<'SH'
#!/bin/sh
r=${OMPI_COMM_WORLD_RANK:-0}
export CUDA_VISIBLE_DEVICES=MIG-5117a000-0000-4000-8000-000000$(printf %06x "$r")
exec "$@"
SH
chmod +x "$wrapper"

NP=4
plan "one GPU shared by 4 ranks" VGPU_SIM_GPUS=1x80G
expect_rc 0
expect_out '^vgpu: 1 simulated physical GPU -> 4 virtual GPUs \(4 ranks, 1 host\)'
if built_with ncclGetVersion; then expect_out 'collectives: ring \(ranks share a GPU'
else expect_out 'collectives: ring \(this build has no NCCL backend\)'; fi
# 0.9 x (80 GiB - 4 x 512 MiB context) / 4 = 17.55 GiB each
expect_out '^ +3 +[^ ]+ +3 +cuda0 Simulated GPU 80.0 GiB +vgpu3 +17.5 GiB$'
# The table fits 80 columns and says what the job needs against its caps.
if [ -z "$(awk 'length($0) > 79' <<<"$raw")" ]; then ok "every line within 79 columns"
else bad "lines over 79 columns: $(awk 'length($0) > 79' <<<"$raw" | head -2)"; fi
expect_out '^vgpu: each rank needs [0-9.]+ [KMG]iB of device memory; the smallest cap is 17.5 GiB$'

plan "one GPU a rank" VGPU_SIM_GPUS=4x80G
expect_rc 0
expect_out '^vgpu: 4 simulated physical GPUs -> 4 virtual GPUs'
if built_with ncclGetVersion; then expect_out 'collectives: nccl \(every rank has its own GPU\)'
else expect_out 'collectives: ring \(this build has no NCCL backend\)'; fi
expect_out '^ +3 +[^ ]+ +3 +cuda3 '

run "vgpurun --plan" 60 env VGPU_SIM_GPUS=2x24G "$VGPU_BUILD_DIR/vgpurun" --plan -np 4 -- "$TRAIN" "$cfg"
expect_rc 0
expect_out '^vgpu: 2 simulated physical GPUs -> 4 virtual GPUs'
expect_no_out 'vgpu_train: done'

# Finding 11: NCCL's buffers come after the arena, outside the cap.
plan "a cap that leaves NCCL no room" VGPU_SIM_GPUS=4x80G VGPU_MEMORY_LIMIT=79G
if grep -q 'NCCL backend not built\|no NCCL backend' <<<"$out"; then
  echo "SKIP NCCL's room: this build has no NCCL"
else
  expect_rc 2
  expect_out 'cuda0 \(Simulated GPU 80.0 GiB\) cannot hold 1 x \(cap 79.0 GiB \+ CUDA context 512.0 MiB \+ NCCL buffers 1.0 GiB\) = 80.5 GiB; 80.0 GiB is free'
  if [ "$(grep -c 'cannot hold' <<<"$out")" = 1 ]; then ok "said once"; else bad "said $(grep -c 'cannot hold' <<<"$out") times"; fi
fi

NP=8
run "two hosts, a GPU per task" 60 env VGPU_SIM_GPUS=4x80G "$MPIRUN" -np 8 "$per_task" "$TRAIN" "$cfg" --plan
expect_rc 0
expect_out '^vgpu: 8 simulated physical GPUs -> 8 virtual GPUs \(8 ranks, 2 hosts\)'
for r in 0 1 2 3 4 5 6 7; do
  expect_out "^ +$r +node$((r / 4)) +$((r % 4)) +cuda$((r % 4)) Simulated"
done

# MIG: one physical GPU, an instance a rank; NCCL does not support MIG.
run "MIG instances, one a rank" 60 env VGPU_SIM_GPUS=1x80G/mig=4 "$MPIRUN" -np 4 "$wrapper" "$TRAIN" "$cfg" --plan
expect_rc 0
expect_out '^vgpu: 1 simulated physical GPU, 4 MIG instances -> 4 virtual GPUs'
if built_with ncclGetVersion; then expect_out 'collectives: ring \(ranks run on MIG instances, which NCCL does not support'
else expect_out 'collectives: ring \(this build has no NCCL backend\)'; fi
expect_out '^ +2 +[^ ]+ +2 +cuda2 Simulated GPU 80.0 GiB MIG 3/4'
# CUDA shows a process one MIG instance: without a list of their own all
# ranks land on the first, and the user is told how to use the others.
run "MIG instances, none given to the ranks" 60 env VGPU_SIM_GPUS=1x80G/mig=3 "$MPIRUN" -np 4 "$TRAIN" "$cfg" --plan
expect_rc 0
expect_out '^vgpu: 1 simulated physical GPU, 1 MIG instance -> 4 virtual GPUs'
expect_out '4 ranks share MIG instance MIG-5117a000-0000-4000-8000-000000000000: CUDA shows a process one MIG instance'

NP=4
plan "EXCLUSIVE_PROCESS, 4 ranks, no MPS" VGPU_SIM_GPUS=1x80G/exclusive
expect_rc 2
expect_out 'cuda0 \(.*\) is in EXCLUSIVE_PROCESS compute mode: one process may use it, and 4 ranks are bound to it; run one rank per GPU, start MPS'
mkdir -p "$WORK/mps"
plan "EXCLUSIVE_PROCESS under MPS" VGPU_SIM_GPUS=1x80G/exclusive CUDA_MPS_PIPE_DIRECTORY="$WORK/mps"
expect_rc 0
expect_out '^vgpu: MPS: 1 of 1 host run their ranks as MPS clients'

# Finding 1: MPS clients see free = their limit - usage; the caps are checked
# against physically free memory and each against its client limit.
plan "MPS limit 10 GiB a client" VGPU_SIM_GPUS=1x80G CUDA_MPS_PIPE_DIRECTORY="$WORK/mps" \
  CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=10240MB VGPU_MEMORY_LIMIT=9728M
expect_rc 0
expect_out '^ +3 +[^ ]+ +3 +cuda0 .* +9.5 GiB$'
plan "MPS limit below the cap" VGPU_SIM_GPUS=1x80G CUDA_MPS_PIPE_DIRECTORY="$WORK/mps" \
  CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=4096MB VGPU_MEMORY_LIMIT=8G
expect_rc 2
expect_out 'its cap 8.0 GiB \+ CUDA context 512.0 MiB is over its MPS limit 4.0 GiB'

plan "more GPUs than ranks" VGPU_SIM_GPUS=8x80G
expect_rc 0
expect_out '^vgpu: 4 of 8 GPUs on [^ ]+ left idle \(more ranks, or devices.map, use them\)$'

plan "a PROHIBITED GPU is left out" VGPU_SIM_GPUS=1x80G/prohibited,1x80G
expect_rc 0
expect_out 'GPU-5117a000-0000-4000-8000-000000000000 \(Simulated GPU 80.0 GiB\) is in PROHIBITED compute mode: left out'
expect_out '^vgpu: 1 simulated physical GPU -> 4 virtual GPUs'

plan "a failing GPU" VGPU_SIM_GPUS=2x80G/failing=1
expect_rc 1
expect_out 'GPU 1 \(GPU-5117a000-0000-4000-8000-000000000001, 00000000:11:00.0\) is present but failing'
expect_no_out 'CPU-simulated'

plan "no driver" VGPU_SIM_GPUS=nodriver
expect_rc 0
expect_out 'no CUDA GPU visible: using CPU-simulated virtual GPUs'

# A driver older than the CUDA runtime is not "no driver": an error with
# both versions and the way out, never a silent CPU run.
plan "a driver too old for the runtime" VGPU_SIM_GPUS=driver=12.8,1x80G
expect_nonzero
expect_out 'the NVIDIA driver supports CUDA 12.8, older than the CUDA 13.0 runtime this vgpu was built with \(it needs driver R580 or newer\)'
expect_no_out 'CPU-simulated'
plan "a driver of the runtime's major version" VGPU_SIM_GPUS=driver=13.0,1x80G
expect_rc 0

# The automatic cap leaves a lone rank NCCL's buffers: 0.9 x (10 GiB -
# 512 MiB context - 1 GiB NCCL) = 7.65 GiB, so a 10 GiB GPU a rank starts
# (a build without NCCL keeps no room for it: 0.9 x 9.5 GiB = 8.55 GiB).
NP=2
plan "two 10 GiB GPUs, defaults" VGPU_SIM_GPUS=2x10G
expect_rc 0
if built_with ncclGetVersion; then expect_out '^ +1 +[^ ]+ +1 +cuda1 Simulated GPU 10.0 GiB +vgpu1 +7.6 GiB$'
else expect_out '^ +1 +[^ ]+ +1 +cuda1 Simulated GPU 10.0 GiB +vgpu1 +8.5 GiB$'; fi
expect_no_out 'cannot hold'

# Deterministic mode on GPUs: the mpi backend (the ring's all-to-all needs
# host windows, NCCL has none); an explicit ring is refused before anything
# runs; on the simulated GPUs the run gives the same parameters for 1 and 2
# ranks.
run "deterministic mode, auto" 60 env VGPU_SIM_GPUS=1x80G "$MPIRUN" -np 2 "$TRAIN" "$cfg" --plan --set train.deterministic=true
expect_rc 0
expect_out 'collectives: mpi \(deterministic mode on GPUs'
run "deterministic mode, ring asked for" 60 env VGPU_SIM_GPUS=1x80G "$MPIRUN" -np 2 "$TRAIN" "$cfg" --plan --set train.deterministic=true --set comm.backend=ring
expect_rc 2
expect_out 'comm.backend = ring has no all-to-all on GPU memory, which deterministic mode needs: use comm.backend = mpi or auto'
det_crc=()
for n in 1 2; do
  run "deterministic mode on simulated GPUs, np=$n" 90 env VGPU_SIM_GPUS=1x80G "$MPIRUN" -np "$n" "$TRAIN" "$cfg" --quiet --set train.deterministic=true --set train.max_steps=6
  expect_rc 0
  expect_out 'backend=mpi'
  det_crc+=("$(grep -oE 'params_crc=[0-9a-f]+' <<<"$out")")
done
if [ -n "${det_crc[0]}" ] && [ "${det_crc[0]}" = "${det_crc[1]}" ]; then ok "np=1 and np=2 agree: ${det_crc[0]}"
else bad "deterministic runs differ: ${det_crc[*]}"; fi
NP=4

# ---- vgpurun: its rank shim pins CUDA_VISIBLE_DEVICES for programs that
# know nothing of vgpu, by the runtime's placement; a vgpu program takes the
# pin back and binds once, with every rank's view and its config. ----
VGPURUN="$VGPU_BUILD_DIR/vgpurun"
vplan() { run "vgpurun: $1" 60 env "${@:2}" "$VGPURUN" --plan -np "$NP" -- "$TRAIN" "$cfg"; }
vplan "EXCLUSIVE_PROCESS under MPS" VGPU_SIM_GPUS=1x80G/exclusive CUDA_MPS_PIPE_DIRECTORY="$WORK/mps"
expect_rc 0
expect_out '^vgpu: MPS: 1 of 1 host run their ranks as MPS clients'
run "vgpurun: a GPU a task on EXCLUSIVE_PROCESS GPUs" 60 env VGPU_SIM_GPUS=4x80G/exclusive \
  "$VGPURUN" --plan -np 4 -- "$per_task" "$TRAIN" "$cfg"
expect_rc 0
expect_out '^vgpu: 4 simulated physical GPUs -> 4 virtual GPUs'
expect_out '^ +3 +node0 +3 +cuda3 Simulated'
vplan "a PROHIBITED GPU beside a healthy one" VGPU_SIM_GPUS=1x80G/prohibited,1x80G
expect_rc 0
expect_out '^vgpu: 1 simulated physical GPU -> 4 virtual GPUs'
run "vgpurun: devices.map" 60 env VGPU_SIM_GPUS=2x80G "$VGPURUN" --plan -np 4 -- "$TRAIN" "$cfg" --set devices.map=1,1,0,0
expect_rc 0
expect_out '^ +0 +[^ ]+ +0 +cuda1 '
expect_out '^ +1 +[^ ]+ +1 +cuda1 '
expect_out '^ +2 +[^ ]+ +2 +cuda0 '
expect_out '^ +3 +[^ ]+ +3 +cuda0 '
run "vgpurun: devices.ranks_per_device = 3" 60 env VGPU_SIM_GPUS=2x80G "$VGPURUN" --plan -np 4 -- "$TRAIN" "$cfg" --set devices.ranks_per_device=3
expect_rc 0
expect_out '^ +2 +[^ ]+ +2 +cuda0 '
expect_out '^ +3 +[^ ]+ +3 +cuda1 '
run "vgpurun: MIG instances, one a rank" 60 env VGPU_SIM_GPUS=1x80G/mig=4 "$VGPURUN" --plan -np 4 -- "$wrapper" "$TRAIN" "$cfg"
expect_rc 0
expect_out '^vgpu: 1 simulated physical GPU, 4 MIG instances -> 4 virtual GPUs'
if built_with ncclGetVersion; then expect_out 'collectives: ring \(ranks run on MIG instances'
else expect_out 'collectives: ring \(this build has no NCCL backend\)'; fi
# The other setups of this file under vgpurun too: the same decisions.
NP=2
vplan "two 10 GiB GPUs, defaults" VGPU_SIM_GPUS=2x10G
expect_rc 0
expect_no_out 'cannot hold'
vplan "a driver too old for the runtime" VGPU_SIM_GPUS=driver=12.8,1x80G
expect_nonzero
expect_out 'the NVIDIA driver supports CUDA 12.8, older than the CUDA 13.0 runtime'
run "vgpurun: deterministic mode on GPUs" 60 env VGPU_SIM_GPUS=1x80G "$VGPURUN" --plan -np 2 -- "$TRAIN" "$cfg" --set train.deterministic=true
expect_rc 0
expect_out 'collectives: mpi \(deterministic mode on GPUs'
NP=4
run "vgpurun: MIG instances, none given to the ranks" 60 env VGPU_SIM_GPUS=1x80G/mig=3 "$VGPURUN" --plan -np 4 -- "$TRAIN" "$cfg"
expect_rc 0
expect_out '^vgpu: 1 simulated physical GPU, 1 MIG instance -> 4 virtual GPUs'

# What a program that knows nothing of vgpu sees: its own GPU as its only
# one (cuda:0), by the same placement (PROHIBITED left out, ranks in order
# filling the GPUs); one GPU in view (a per-task GPU) is left alone.
show='echo "rank $RANK sees ${CUDA_VISIBLE_DEVICES-unset}"'
gpu() { echo "GPU-5117a000-0000-4000-8000-00000000000$1"; }
run "vgpurun: a plain program, two GPUs" 60 env VGPU_SIM_GPUS=2x80G "$VGPURUN" -np 4 -- sh -c "$show"
expect_rc 0
expect_out "^rank 1 sees $(gpu 0)\$"
expect_out "^rank 2 sees $(gpu 1)\$"
run "vgpurun: a plain program, PROHIBITED GPU 0" 60 env VGPU_SIM_GPUS=1x80G/prohibited,1x80G "$VGPURUN" -np 2 -- sh -c "$show"
expect_rc 0
expect_out "^rank 0 sees $(gpu 1)\$"
expect_out "^rank 1 sees $(gpu 1)\$"
run "vgpurun: a plain program, VGPU_RANKS_PER_DEVICE=3" 60 env VGPU_SIM_GPUS=2x80G "$VGPURUN" --ranks-per-gpu 3 -np 4 -- sh -c "$show"
expect_out "^rank 2 sees $(gpu 0)\$"
expect_out "^rank 3 sees $(gpu 1)\$"
run "vgpurun: a plain program, one GPU in view" 60 env VGPU_SIM_GPUS=2x80G CUDA_VISIBLE_DEVICES=1 "$VGPURUN" -np 2 -- sh -c "$show"
expect_out '^rank 0 sees 1$'
expect_out '^rank 1 sees 1$'
# EXCLUSIVE_PROCESS GPUs take two ranks each under MPS (the shim knows MPS),
# and without it the placement is refused (exit 2), said once.
run "vgpurun: a plain program, EXCLUSIVE_PROCESS GPUs under MPS" 60 env VGPU_SIM_GPUS=2x80G/exclusive \
  CUDA_MPS_PIPE_DIRECTORY="$WORK/mps" "$VGPURUN" -np 4 -- sh -c "$show"
expect_rc 0
expect_out "^rank 1 sees $(gpu 0)\$"
expect_out "^rank 2 sees $(gpu 1)\$"
run "vgpurun: a plain program, EXCLUSIVE_PROCESS GPUs, no MPS" 60 env VGPU_SIM_GPUS=2x80G/exclusive \
  "$VGPURUN" -np 4 -- sh -c "$show"
expect_rc 2
expect_out 'vgpurun-rank: rank 0: cannot place this host.s 4 ranks on its GPUs: .*EXCLUSIVE_PROCESS'
if [ "$(grep -c 'vgpurun-rank: rank .: cannot place' <<<"$out")" = 1 ]; then ok "said once"
else bad "said $(grep -c 'vgpurun-rank: rank .: cannot place' <<<"$out") times"; fi
expect_no_out 'sees'
# A list of MIG instances: CUDA shows a process one, so the shim hands them
# out, one a rank; a vgpu program keeps that (it could not see the others).
migs=$(for k in 0 1 2 3; do printf 'MIG-5117a000-0000-4000-8000-000000%06x,' "$k"; done)
run "vgpurun: a list of MIG instances" 60 env VGPU_SIM_GPUS=1x80G/mig=4 CUDA_VISIBLE_DEVICES="${migs%,}" \
  "$VGPURUN" --plan -np 4 -- "$TRAIN" "$cfg"
expect_rc 0
expect_out '^vgpu: 1 simulated physical GPU, 4 MIG instances -> 4 virtual GPUs'
# The pin is taken back by a vgpu program: with the launcher's two GPUs in
# view again, devices.map can send ranks to either (pinned, each rank would
# see one GPU and the map would be refused).
run "vgpurun: the pin taken back (devices.map over CUDA_VISIBLE_DEVICES=1,0)" 60 env VGPU_SIM_GPUS=2x80G \
  CUDA_VISIBLE_DEVICES=1,0 "$VGPURUN" --plan -np 4 -- "$TRAIN" "$cfg" --set devices.map=1,1,0,0
expect_rc 0
expect_out '^ +0 +[^ ]+ +0 +cuda1 '
expect_out '^ +3 +[^ ]+ +3 +cuda0 '
# ... unless something between the shim and the program chose for itself.
late="$WORK/late_choice.sh"
printf '#!/bin/sh\nexport CUDA_VISIBLE_DEVICES=1\nexec "$@"\n' >"$late"
chmod +x "$late"
run "vgpurun: a wrapper's own choice stands" 60 env VGPU_SIM_GPUS=2x80G CUDA_VISIBLE_DEVICES=0,1 \
  "$VGPURUN" --plan -np 4 -- "$late" "$TRAIN" "$cfg"
expect_rc 0
expect_out '^vgpu: 1 simulated physical GPU -> 4 virtual GPUs'
# A scheduler's per-task GPU set before the shim (as srun --gpus-per-task
# does): the shim sees one GPU and leaves it; EXCLUSIVE_PROCESS is no bar.
run "per-task GPUs on EXCLUSIVE_PROCESS GPUs, set before the shim" 60 env VGPU_SIM_GPUS=4x80G/exclusive \
  "$MPIRUN" -np 4 "$per_task" "$VGPU_BUILD_DIR/vgpurun-rank" "$TRAIN" "$cfg" --plan
expect_rc 0
expect_out '^vgpu: 4 simulated physical GPUs -> 4 virtual GPUs'
expect_no_out 'vgpurun-rank'

# The backend facts are agreed, whatever one rank sees (VGPU_TEST_NCCL_VERSION
# stands for the NCCL a rank loads): a rank that built another backend than
# its peers would hang in set-up.
rank1="$WORK/rank1_env.sh"
printf '#!/bin/sh\n[ "${OMPI_COMM_WORLD_RANK:-0}" = 1 ] && export $RANK1_ENV\nexec "$@"\n' >"$rank1"
chmod +x "$rank1"
if built_with ncclGetVersion; then
  run "NCCL 2.13 on rank 1 only" 60 env VGPU_SIM_GPUS=2x80G RANK1_ENV=VGPU_TEST_NCCL_VERSION=21300 \
    "$MPIRUN" -np 2 "$rank1" "$TRAIN" "$cfg" --plan
  expect_rc 0
  expect_out 'collectives: ring \(NCCL 2.13 found at run time, and vgpu needs >= 2.14 .* on 1 of 2 ranks, e.g. rank 1 \(host [^;]+; NCCL 2.[0-9]+ elsewhere\)\)'
  run "NCCL_MULTI_RANK_GPU_ENABLE on rank 1 only" 60 env VGPU_SIM_GPUS=1x80G VGPU_TEST_NCCL_VERSION=23000 \
    RANK1_ENV=NCCL_MULTI_RANK_GPU_ENABLE=1 "$MPIRUN" -np 2 "$rank1" "$TRAIN" "$cfg" --plan
  expect_rc 0
  expect_out 'collectives: ring \(ranks share a GPU, which NCCL 2.30 refuses'
  run "NCCL_MULTI_RANK_GPU_ENABLE on every rank" 60 env VGPU_SIM_GPUS=1x80G VGPU_TEST_NCCL_VERSION=23000 \
    NCCL_MULTI_RANK_GPU_ENABLE=1 "$MPIRUN" -np 2 "$TRAIN" "$cfg" --plan
  expect_rc 0
  expect_out 'collectives: nccl \(ranks share a GPU under NCCL_MULTI_RANK_GPU_ENABLE=1'
  # Two ranks a GPU under NCCL: the automatic caps keep NCCL's room too:
  # 0.9 x (80 GiB - 2 x (512 MiB + 1 GiB)) / 2 = 34.65 GiB.
  expect_out '^ +1 +[^ ]+ +1 +cuda0 Simulated GPU 80.0 GiB +vgpu1 +34.6 GiB$'
else
  echo "--- not run: the agreed NCCL facts need a build with NCCL"
fi

# NCCL on some ranks only: the ranks agree the backend (a rank that built
# another would hang in set-up). Rank 1 runs with the CUDA toolkit hidden (a
# mount namespace of its own), so it cannot load NCCL.
cudadir=$(readlink -f /usr/local/cuda 2>/dev/null || true)
if built_with ncclGetVersion && [ "$(id -u)" = 0 ] &&
   [ -d "$cudadir" ] && command -v unshare >/dev/null && grep -q 'libnccl.so.2 ' <<<"$(ldconfig -p)"; then
  hide="$WORK/hide_nccl_on_rank1.sh"
  cat >"$hide" <<'SH'
#!/bin/sh
if [ "${OMPI_COMM_WORLD_RANK:-0}" = 1 ]; then
  exec unshare -m sh -c 'mount -t tmpfs none "$HIDE_DIR" && exec "$0" "$@"' "$@"
fi
exec "$@"
SH
  chmod +x "$hide"
  run "NCCL missing on rank 1 only" 60 env VGPU_SIM_GPUS=2x80G HIDE_DIR="$cudadir" "$MPIRUN" -np 2 "$hide" "$TRAIN" "$cfg" --plan
  expect_rc 0
  expect_out 'collectives: ring \(NCCL could not be loaded at run time \(libnccl.so.2 not found\) on 1 of 2 ranks, e.g. rank 1 \(host'
  run "NCCL missing on rank 1 only, a short run" 60 env VGPU_SIM_GPUS=2x80G HIDE_DIR="$cudadir" "$MPIRUN" -np 2 "$hide" "$TRAIN" "$cfg" --quiet --set train.max_steps=5
  expect_rc 0
  expect_out 'backend=ring .*status=ok'
  run "vgpurun: NCCL missing on rank 1 only" 60 env VGPU_SIM_GPUS=2x80G HIDE_DIR="$cudadir" "$VGPU_BUILD_DIR/vgpurun" --plan -np 2 -- "$hide" "$TRAIN" "$cfg"
  expect_rc 0
  expect_out 'collectives: ring \(NCCL could not be loaded at run time \(libnccl.so.2 not found\) on 1 of 2 ranks, e.g. rank 1'
else
  echo "--- not run: NCCL on some ranks only needs an NCCL build, root, unshare and NCCL in $cudadir"
fi
run "no driver, kind cuda" 60 env VGPU_SIM_GPUS=nodriver "$MPIRUN" -np 2 "$TRAIN" "$cfg" --plan --set devices.kind=cuda
expect_rc 2
expect_out 'devices.kind = cuda, but no CUDA GPU is visible'

plan "a bad topology" VGPU_SIM_GPUS=4x80Q
expect_nonzero
expect_out "VGPU_SIM_GPUS: '80Q' is not a memory size"
# One line says it all: no trace lines of vgpu's source on top.
plan "a capital X" VGPU_SIM_GPUS=8X80G
expect_rc 2
expect_out "VGPU_SIM_GPUS: '8X80G' is not a memory size of at least 1M \(e.g. 80G\); a count takes a lower-case x: 8x80G"
expect_no_out 'gpu_sim\.c'
if [ "$(grep -c . <<<"$out")" -le 2 ]; then ok "said in at most 2 lines"
else bad "said in $(grep -c . <<<"$out") lines"; fi

# The simulated GPUs run the CPU's math: the same parameters bit for bit.
run "CPU run" 60 "$MPIRUN" -np 4 "$TRAIN" "$cfg" --quiet --set train.max_steps=30
cpu_crc=$(grep -oE 'params_crc=[0-9a-f]+' <<<"$out")
run "simulated GPU run" 60 env VGPU_SIM_GPUS=1x80G "$MPIRUN" -np 4 "$TRAIN" "$cfg" --quiet --set train.max_steps=30
expect_rc 0
expect_out 'devices=1xcuda-sim/4vgpu backend=ring .*status=ok'
if [ -n "$cpu_crc" ] && grep -q "$cpu_crc" <<<"$out"; then ok "same $cpu_crc as the CPU run"; else bad "simulated run's params differ from the CPU run's ($cpu_crc)"; fi
# Finding 6: the host staging window (the GPU data path; VGPU_RING_STAGING=1
# takes it on CPU devices) is sized from the largest collective, not 64 MiB:
# the default MLP's 235,146 parameters (784-256-128-10) with AdamW's two
# state floats each make 1,881,168 bytes, rounded up to 4 KiB.
# stage_sizes ENV...: a paused 2-rank job's staging windows (memfd:vgpu-stage
# maps) in $sizes, its output in $WORK/staging.out.
stage_sizes() {
  env "$@" VGPU_TEST_START_PAUSE=warmup:3 "$MPIRUN" -np 2 "$TRAIN" "$cfg" --quiet \
    --set train.max_steps=5 >"$WORK/staging.out" 2>&1 &
  local job=$! p range
  for _ in $(seq 100); do grep -q "test pause at warmup" "$WORK/staging.out" && break; sleep 0.1; done
  sizes=""
  for p in $(pgrep -f -- "$TRAIN $cfg --quiet --set train.max_steps=5"); do
    while read -r range _; do
      sizes="$sizes $((16#${range#*-} - 16#${range%-*}))"
    done < <(grep 'memfd:vgpu-stage' "/proc/$p/maps")
  done
  wait "$job"
  rc=$?
  out=$(cat "$WORK/staging.out")
}
stage_sizes VGPU_RING_STAGING=1
expect_rc 0
want=$(( (235146 * 4 * 2 + 4095) / 4096 * 4096 ))
if [ -n "${sizes// /}" ] && [ -z "$(tr ' ' '\n' <<<"$sizes" | grep -v "^$want\$" | grep .)" ]; then
  ok "staging windows of $want bytes (the largest collective), not 64 MiB"
else bad "staging window sizes:$sizes (want $want each)"; fi
# Ranks sharing a GPU without MPS take turns on it (first GPU run,
# docs/gpu-runs/2026-11-26-h100.md): the job table says so, and how to run
# them at once. (The ring's choice between CUDA IPC and staging that goes
# with it is test_comm_choose's: simulated GPUs compute on the CPU, and their
# ring maps host memory whatever the choice.)
turns='^vgpu: no MPS: up to 2 ranks take turns on a GPU'
run "2 ranks on one GPU, no MPS" 60 env VGPU_SIM_GPUS=1x80G "$MPIRUN" -np 2 "$TRAIN" "$cfg" --set train.max_steps=2
expect_rc 0
expect_out "$turns"
expect_out 'vgpurun --mps, or nvidia-cuda-mps-control -d before mpirun'
run "4 ranks on two GPUs, no MPS" 60 env VGPU_SIM_GPUS=2x80G "$MPIRUN" -np 4 "$TRAIN" "$cfg" --set train.max_steps=2
expect_rc 0
expect_out '^vgpu: no MPS: up to 2 ranks take turns on a GPU'
run "3 ranks on two GPUs, no MPS" 60 env VGPU_SIM_GPUS=2x80G "$MPIRUN" -np 3 "$TRAIN" "$cfg" --set train.max_steps=2
expect_rc 0
expect_out '^vgpu: no MPS: up to 2 ranks take turns on a GPU'
run "2 ranks on one GPU under MPS" 60 env VGPU_SIM_GPUS=1x80G CUDA_MPS_PIPE_DIRECTORY="$WORK/mps" \
  "$MPIRUN" -np 2 "$TRAIN" "$cfg" --set train.max_steps=2
expect_rc 0
expect_out '^vgpu: MPS: 1 of 1 host run their ranks as MPS clients'
expect_no_out 'take turns'
run "2 ranks on two GPUs" 60 env VGPU_SIM_GPUS=2x80G "$MPIRUN" -np 2 "$TRAIN" "$cfg" --set train.max_steps=2
expect_rc 0
expect_no_out 'take turns'

# A CUDA build starts on a host without cuBLAS, NCCL or the CUDA runtime's
# shared library: the runtime is static and the others are loaded when first
# used. Shown for real by hiding the toolkit (a mount namespace of this test).
# (The CUDA code lives in libvgpu.so, which vgpu_train loads.)
if built_with cudaGetDeviceCount; then
  deps=$(ldd "$TRAIN" "$VGPU_BUILD_DIR/libvgpu.so" | grep -oE 'lib(cudart|cublas|cublasLt|nccl)\.so[^ ]*' | sort -u | tr '\n' ' ')
  if [ -z "$deps" ]; then ok "vgpu_train and libvgpu.so need no CUDA library to start (ldd)"
  else bad "vgpu_train or libvgpu.so links $deps"; fi
  cudadir=$(readlink -f /usr/local/cuda 2>/dev/null || true)
  if [ "$(id -u)" = 0 ] && [ -d "$cudadir" ] && command -v unshare >/dev/null; then
    run "no CUDA libraries on the host, GPUs that would take NCCL" 60 unshare -m sh -c \
      "mount -t tmpfs none '$cudadir' && exec env VGPU_SIM_GPUS=4x80G '$MPIRUN' -np 4 '$TRAIN' '$cfg' --set train.max_steps=10"
    expect_rc 0
    if built_with ncclGetVersion; then
      expect_out 'collectives: ring \(NCCL could not be loaded at run time \(libnccl.so.2 not found\)\)'
    else
      expect_out 'collectives: ring \(this build has no NCCL backend\)'
    fi
    expect_out 'status=ok'
  else
    echo "--- not run: hiding the CUDA toolkit needs root, unshare and $cudadir"
  fi
else
  echo "--- a build without CUDA: nothing to load"
fi
expect_no_shm
finish
