#!/usr/bin/env bash
# vgpurun_local.sh: vgpurun on this machine: the command it builds, a real
# 4-rank training through it, device settings reaching the ranks, exit status,
# and --mps refused where there is no GPU.
source "$(dirname "$0")/../e2e/lib.sh"
source "$(dirname "$0")/lib.sh"
VGPURUN="$VGPU_BUILD_DIR/vgpurun"
HOSTFILES="$VGPU_SOURCE_DIR/configs/hostfiles"
cores=$(nproc)

run "dry run, 2x cores ranks" 10 "$VGPURUN" -np $((2 * cores)) --dry-run -- "$TRAIN" c.ini
expect_rc 0
expect_out "^([A-Z_]+=[^ ]+ )*mpirun -np $((2 * cores)) .*--oversubscribe --map-by slot --bind-to none( -x [A-Z_]+)* [^ ]*/vgpurun-rank $TRAIN c.ini\$"
# As root vgpurun adds the flag, unless the environment already allows root
# (many MPI container images export both variables).
if [ "$(id -u)" = 0 ] && ! { [ "${OMPI_ALLOW_RUN_AS_ROOT:-}" = 1 ] &&
                             [ "${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-}" = 1 ]; }; then
  expect_out '--allow-run-as-root'
else
  expect_no_out '--allow-run-as-root'
fi

run "dry run, localhost hostfile" 10 "$VGPURUN" --hostfile "$HOSTFILES/localhost" --mem-per-rank 48M --dry-run -- prog
expect_rc 0
expect_out '^VGPU_MEMORY_LIMIT=48M ([A-Z_]+=[^ ]+ )*mpirun -np 4 -q --hostfile .*/localhost .*--bind-to numa:overload-allowed -x VGPU_MEMORY_LIMIT( -x [A-Z_]+)* [^ ]*/vgpurun-rank prog$'
expect_no_out '--oversubscribe'

# The shipped hostfile says slots=4, more than this machine's cores: binding
# must allow that (plain --bind-to numa makes mpirun refuse), for real.
run "the shipped localhost hostfile runs 4 ranks on $cores cores" 120 \
  "$VGPURUN" --hostfile "$HOSTFILES/localhost" -- "$TRAIN" "$CONFIGS/synthetic_small.ini"
expect_rc 0
expect_out '^vgpu_train: done ranks=4 .*status=ok$'
run "-H localhost:4" 120 "$VGPURUN" -H localhost:4 -np 4 -- "$TRAIN" "$CONFIGS/synthetic_small.ini"
expect_rc 0
expect_out '^vgpu_train: done ranks=4 .*status=ok$'

run "4 ranks train through vgpurun" 120 "$VGPURUN" -np 4 --verbose -- "$TRAIN" "$CONFIGS/synthetic_small.ini"
expect_rc 0
expect_out '^vgpurun: ([A-Z_]+=[^ ]+ )*mpirun -np 4 '
expect_out 'vgpu: no GPU: 4 CPU-simulated virtual GPUs \(4 ranks, 1 host; BLAS: [0-9]+ threads?\)'
expect_out '^vgpu_train: done ranks=4 .*status=ok$'
expect_no_shm

# The ranks get the device settings as variables (any program)...
run "variables reach every rank" 60 "$VGPURUN" -np 2 --ranks-per-gpu 2 --mem-per-rank 48M --backend mpi \
  -- sh -c 'echo "rank=$OMPI_COMM_WORLD_RANK rpd=$VGPU_RANKS_PER_DEVICE mem=$VGPU_MEMORY_LIMIT backend=$VGPU_BACKEND"'
expect_rc 0
for r in 0 1; do expect_out "^rank=$r rpd=2 mem=48M backend=mpi\$"; done
# ...and vgpu_train's config takes them (file < environment < --set).
run "vgpu_train takes --mem-per-rank and --backend" 120 "$VGPURUN" -np 2 --mem-per-rank 48M --backend mpi \
  -- "$TRAIN" "$CONFIGS/synthetic_small.ini"
expect_rc 0
expect_out '^ +1 +[^ ]+ +1 +cpu0 .* 48\.0 MiB$'
expect_out 'collectives: mpi'
expect_out '^vgpu_train: done ranks=2 .*backend=mpi .*status=ok$'

run "the job's exit status comes back" 60 "$VGPURUN" -np 2 -- sh -c 'exit 3'
expect_rc 3

# A failure the ranks agreed on ends with their message, not mpirun's report.
run "an exit-2 error: the message, no banner" 60 "$VGPURUN" -np 2 -- "$TRAIN" "$WORK/none.ini"
expect_rc 2
expect_out 'none.ini: cannot open config'
expect_no_banner
# A rank killed by a signal is still told (mpirun -q would say nothing)...
kill_rank1='[ "$OMPI_COMM_WORLD_RANK" = 1 ] && kill -9 $$; sleep 5'
run "a rank killed: vgpurun says so" 60 "$VGPURUN" -np 2 -- sh -c "$kill_rank1"
expect_rc 137
expect_out '^vgpurun: a rank was killed by signal 9 \(Killed\) and mpirun ended the job'
# ...and VGPU_MPIRUN_REPORT=1 keeps mpirun's own report, which names it.
run "VGPU_MPIRUN_REPORT=1" 60 env VGPU_MPIRUN_REPORT=1 "$VGPURUN" -np 2 -- sh -c "$kill_rank1"
expect_rc 137
expect_out 'process rank 1 .*exited on signal 9'

run "--version" 10 "$VGPURUN" --version
expect_rc 0
expect_out '^vgpurun [0-9]+\.[0-9]+\.[0-9]+$'
run "an unknown option: one line" 10 "$VGPURUN" --frobnicate -np 2 -- prog
expect_rc 2
expect_out '^vgpurun: unknown option --frobnicate \(vgpurun --help lists them'
if [ "$(wc -l <<<"$out")" = 1 ]; then ok "one line"; else bad "$(wc -l <<<"$out") lines"; fi
run "a program that is not there" 10 "$VGPURUN" -np 2 -- "$WORK/no-such-program"
expect_rc 127
expect_out "^vgpurun: $WORK/no-such-program: No such file or directory\$"
run "a program that is not executable" 10 "$VGPURUN" -np 2 -- "$CONFIGS/synthetic_small.ini"
expect_rc 126
expect_out 'synthetic_small.ini: not executable$'

# Variables and the launcher's own options pass through.
run "-x and launcher options" 60 "$VGPURUN" -np 2 -x VGPU_TEST_WORD=hello -- --tag-output -- \
  sh -c 'echo "word=$VGPU_TEST_WORD"'
expect_rc 0
for r in 0 1; do expect_out "^\[1,$r\]<stdout>:word=hello\$"; done
run "bad size refused" 10 "$VGPURUN" -np 2 --mem-per-rank lots -- prog
expect_rc 2
expect_out 'mem-per-rank lots: expected a size'

if ls /dev/nvidia[0-9]* >/dev/null 2>&1; then
  echo "--- --mps refusal not checked: this host has a GPU"
else
  run "--mps refused without a GPU" 10 "$VGPURUN" -np 2 --mps --mem-per-rank 1G -- prog
  expect_rc 2
  expect_out '--mps needs an NVIDIA GPU, and .* has none'
fi
finish
