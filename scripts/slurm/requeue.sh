# requeue.sh: sourced by the batch scripts, for runs longer than one
# allocation. The script sets ckpt_dir; this sets resume_args to resume the
# newest checkpoint there, and run_and_requeue runs the job and requeues it
# when it stopped for the time limit with a checkpoint written (exit 75).
#
# The cycle: `#SBATCH --signal=TERM@120` has Slurm send SIGTERM to the job
# steps (the ranks, through srun; not this shell) 120 s before the limit;
# the ranks finish the step, write a checkpoint and exit 75; this shell
# requeues the job (`#SBATCH --requeue`), which keeps its id and so its
# checkpoint directory, and the next start resumes from the newest one.
# scancel signals this shell too, which then dies without requeueing.
resume_args=()
newest=$(ls "$ckpt_dir"/ckpt-*.bin 2>/dev/null | sort | tail -n 1 || true)
if [ -n "$newest" ]; then
  resume_args=(--resume "$newest")
  echo "vgpu batch: resuming from $newest (start $((${SLURM_RESTART_COUNT:-0} + 1)) of job $SLURM_JOB_ID)"
fi

# run_and_requeue CMD...: runs CMD and exits with its status; REQUEUE=0 turns
# the requeue off.
run_and_requeue() {
  local rc=0
  "$@" || rc=$?
  if [ "$rc" = 75 ] && [ "${REQUEUE:-1}" = 1 ]; then
    echo "vgpu batch: stopped with a checkpoint (exit 75): requeueing job $SLURM_JOB_ID"
    scontrol requeue "$SLURM_JOB_ID"
  fi
  exit "$rc"
}
