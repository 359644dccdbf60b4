#!/usr/bin/env bash
# slurm_local.sh: a throw-away one-node Slurm cluster on this machine (its own
# munged, slurmctld and slurmd, everything in a temp directory), then
# `sbatch --wait scripts/slurm/cpu_only.sbatch`: 4 ranks train through
# vgpurun -> srun --mpi=pmix. Checks the bootstrap works the same under srun.
source "$(dirname "$0")/../e2e/lib.sh"
source "$(dirname "$0")/lib.sh"
need_root "to run slurmctld, slurmd and munged"
need_cmds slurm-wlm slurmctld slurmd sbatch sinfo squeue scancel srun
need_cmds munge munged
need_cmds iproute2 ss
[ -e /usr/lib/x86_64-linux-gnu/slurm-wlm/mpi_pmix.so ] || ls /usr/lib/*/slurm*/mpi_pmix*.so >/dev/null 2>&1 ||
  skip "Slurm's PMIx plugin (mpi_pmix.so) not found"

T=$WORK/slurm
chmod 0755 "$WORK" # munged checks every directory above its socket
mkdir -m 0755 "$T" "$T/munge-run"
mkdir -m 0700 "$T/munge-etc" "$T/munge-lib" "$T/munge-log"
mkdir -p "$T/ctld" "$T/slurmd" "$T/log"

# ---- munge: own key and socket ----
dd if=/dev/urandom of="$T/munge-etc/munge.key" bs=1024 count=1 status=none
chmod 0400 "$T/munge-etc/munge.key"
SOCKET=$T/munge-run/munge.socket
munged --key-file="$T/munge-etc/munge.key" --socket="$SOCKET" --pid-file="$T/munge-run/munged.pid" \
  --seed-file="$T/munge-lib/seed" --log-file="$T/munge-log/munged.log" ||
  { cat "$T/munge-log/munged.log"; echo "FAIL munged did not start"; exit 1; }
at_exit 'm=$(cat "$T/munge-run/munged.pid"); kill $m; for _ in $(seq 50); do kill -0 $m || break; sleep 0.1; done'

# ---- slurm.conf: non-default ports, state and logs here ----
free_port() {
  local p
  for _ in $(seq 50); do
    p=$((20000 + RANDOM % 20000))
    [ -z "$(ss -Htan "sport = :$p")" ] && [ -z "$(ss -Htan "sport = :$((p + 1))")" ] && { echo $p; return; }
  done
  echo 26817
}
PORT=$(free_port)
HOST=$(hostname -s)
cat >"$T/slurm.conf" <<EOF
ClusterName=vgputest$$
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCKET
StateSaveLocation=$T/ctld
SlurmdSpoolDir=$T/slurmd
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/log/slurmctld.log
SlurmdLogFile=$T/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
MinJobAge=5
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=$(($(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 256)) State=UNKNOWN
PartitionName=vgpu Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
# Not exported: this shell must not match the "left behind" sweep below.
CONF=$T/slurm.conf
sl() { SLURM_CONF=$CONF "$@"; }

# Last resort on the way out: anything still carrying this cluster's
# SLURM_CONF (a job step, slurmstepd after a failure) is this test's.
kill_leftovers() {
  local p
  for p in $(grep -lsxF "SLURM_CONF=$CONF" --null-data /proc/[0-9]*/environ | cut -d/ -f3); do
    [ "$p" != $$ ] && kill -9 "$p"
  done
}
at_exit kill_leftovers

# ---- daemons (foreground children, so this script owns their pids) ----
slurmctld -D -i -f "$CONF" >"$T/log/slurmctld.out" 2>&1 &
CTLD=$!
at_exit "kill $CTLD; wait $CTLD"
slurmd -D -N "$HOST" -f "$CONF" >"$T/log/slurmd.out" 2>&1 &
SLURMD=$!
# Jobs first (their steps are children of slurmd), then slurmd.
at_exit "kill $SLURMD; wait $SLURMD"
at_exit 'sl scancel --quiet --partition=vgpu; for _ in $(seq 50); do [ -z "$(sl squeue -h)" ] && break; sleep 0.2; done'

t0=$(date +%s.%N)
for _ in $(seq 100); do
  [ "$(sl sinfo -h -o %t 2>/dev/null)" = idle ] && break
  sleep 0.2
done
if [ "$(sl sinfo -h -o %t 2>/dev/null)" != idle ]; then
  echo "FAIL the node did not come up: $(sl sinfo 2>&1)"
  tail -20 "$T/log/slurmctld.log" "$T/log/slurmd.log"
  exit 1
fi
echo "--- local Slurm up after $(echo "$(date +%s.%N) - $t0" | bc)s (port $PORT, node $HOST)"

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
expect_out '^vgpurun: srun --mpi=pmix --export=ALL -n 4 .*/vgpu_train .*synthetic_small\.ini --set devices\.kind=cpu --set checkpoint\.dir=.*/ckpt$'
expect_out 'vgpu: no GPU: 4 CPU-simulated virtual GPUs \(4 ranks, 1 host\)'
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
finish
