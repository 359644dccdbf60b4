#!/bin/sh
# per_task_example.sh PROGRAM ARGS...: runs PROGRAM as one rank of a job on
# hosts of 4 GPUs with one GPU per task, as Slurm's --gpus-per-task=1 would
# place it: rank r counts as on host node<r/4> (VGPU_TEST_HOST) and sees only
# GPU r%4. With VGPU_SIM_GPUS it previews such a cluster on one machine
# (docs/CLUSTER.md: Planning).
r=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-0}}
export VGPU_TEST_HOST=node$((r / 4))
export CUDA_VISIBLE_DEVICES=$((r % 4))
exec "$@"
