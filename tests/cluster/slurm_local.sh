#!/usr/bin/env bash
# slurm_local.sh: the throw-away one-node Slurm cluster users make
# (scripts/cluster/slurm.sh up: its own munged, slurmctld and slurmd), then
# `sbatch --wait scripts/slurm/cpu_only.sbatch`: 4 ranks train through
# vgpurun -> srun --mpi=pmix, and a second allocation resumes; down stops
# exactly those daemons and removes the cluster's files. Without root the
# script says so.
source "$(dirname "$0")/../e2e/lib.sh"
source "$(dirname "$0")/lib.sh"
need_root "to run slurmctld, slurmd and munged"
need_cmds slurm-wlm slurmctld slurmd sbatch sinfo squeue scancel srun
need_cmds munge munged
need_cmds iproute2 ss
[ -e /usr/lib/x86_64-linux-gnu/slurm-wlm/mpi_pmix.so ] || ls /usr/lib/*/slurm*/mpi_pmix*.so >/dev/null 2>&1 ||
  skip "Slurm's PMIx plugin (mpi_pmix.so) not found"

SLURM_SH=$VGPU_SOURCE_DIR/scripts/cluster/slurm.sh
# Without root: said, nothing started (checked as nobody when we are root).
if command -v setpriv >/dev/null; then
  run "slurm.sh up without root" 20 setpriv --reuid=65534 --regid=65534 --clear-groups \
    "$SLURM_SH" up --name nr$$
  expect_rc 1
  expect_out '^slurm.sh: needs root \(it runs slurmctld, slurmd and munged\): run it with sudo$'
fi

NAME=t$(($$ % 10000000))
T=$WORK/slurm
mkdir -p "$T"
at_exit "$SLURM_SH down --name $NAME"
t0=$(date +%s.%N)
run "slurm.sh up" 60 "$SLURM_SH" up --name "$NAME"
expect_rc 0
[ "$rc" = 0 ] || { finish; exit; }
expect_out "^slurm.sh: cluster '$NAME' up: node $(hostname -s) "
echo "--- local Slurm up after $(echo "$(date +%s.%N) - $t0" | bc)s"
# Not exported: this shell must not look like a job of the cluster.
CONF=$(sed -n 's/^export SLURM_CONF=//p' <<<"$("$SLURM_SH" env --name "$NAME")")
[ -f "$CONF" ] && ok "SLURM_CONF=$CONF" || bad "no slurm.conf from slurm.sh env"
sl() { SLURM_CONF=$CONF "$@"; }
HOST=$(hostname -s)

# ---- the job: the batch script exactly as a user submits it ----
cd "$VGPU_SOURCE_DIR"
# The script asks for --overcommit itself: 4 tasks on this 2-CPU node.
run "sbatch --wait cpu_only.sbatch (4 ranks)" 90 env SLURM_CONF="$CONF" CKPT_DIR="$T/ckpt" \
  sbatch --wait --ntasks=4 --time=5 \
  --output="$T/job.out" scripts/slurm/cpu_only.sbatch configs/synthetic_small.ini
expect_rc 0
echo "--- job output:"
sed 's/^/     | /' "$T/job.out"
out=$(cat "$T/job.out")
expect_out '^vgpurun: ([A-Z_]+=[^ ]+ )*srun --mpi=pmix --export=ALL -n 4 .*/vgpurun-rank [^ ]*/vgpu_train .*synthetic_small\.ini --set devices\.kind=cpu --set checkpoint\.dir=.*/ckpt$'
expect_out 'vgpu: no GPU: 4 CPU-simulated virtual GPUs \(4 ranks, 1 host; BLAS: [0-9]+ threads?\)'
for r in 0 1 2 3; do expect_out "^ +$r +$HOST +$r +cpu0 "; done
expect_out 'collectives: ring'
last=$(grep -v '^$' <<<"$out" | tail -n 1)
if grep -qE '^vgpu_train: done ranks=4 devices=1xcpu/4vgpu .*status=ok$' <<<"$last"; then
  ok "last line is the summary"
else
  bad "last line is not the summary: $last"
fi
expect_within 60
expect_no_shm

# A second allocation of the same run (what a requeue starts) resumes from
# the newest checkpoint the first one left.
newest=$(ls "$T/ckpt"/ckpt-*.bin 2>/dev/null | sort | tail -n 1)
if [ -n "$newest" ]; then ok "the job left $(basename "$newest")"; else bad "no checkpoint in $T/ckpt"; fi
run "sbatch again: resume from the newest checkpoint" 90 env SLURM_CONF="$CONF" CKPT_DIR="$T/ckpt" \
  sbatch --wait --ntasks=4 --time=5 --output="$T/job2.out" scripts/slurm/cpu_only.sbatch \
  configs/synthetic_small.ini --set train.epochs=3
expect_rc 0
out=$(cat "$T/job2.out")
expect_out "^vgpu batch: resuming from $newest "
expect_out '^vgpu_train: done ranks=4 .*epochs=3 .*status=ok$'

# ---- down stops what up started and removes its files ----
pids=$(cat "${CONF%/*}"/slurmctld.pid "${CONF%/*}"/slurmd.pid "${CONF%/*}"/munge-run/munged.pid 2>/dev/null)
run "slurm.sh down" 60 "$SLURM_SH" down --name "$NAME"
expect_rc 0
expect_out "^slurm.sh: cluster '$NAME' is down$"
alive=""
for p in $pids; do kill -0 "$p" 2>/dev/null && alive="$alive $p"; done
if [ -n "$pids" ] && [ -z "$alive" ]; then ok "munged, slurmctld and slurmd stopped"
else bad "daemons still running:$alive (pids: $pids)"; fi
if [ ! -e "${CONF%/*}" ]; then ok "no state left"; else bad "${CONF%/*} left"; fi
run "slurm.sh status" 10 "$SLURM_SH" status --name "$NAME"
expect_out "cluster '$NAME' is not up"
finish
