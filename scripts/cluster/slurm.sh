#!/usr/bin/env bash
# slurm.sh: a throw-away one-node Slurm cluster on this machine (its own munged,
# slurmctld and slurmd on free ports, with state, logs and key in one
# directory), so that sbatch, srun and squeue work as on a real cluster and a
# batch script can be rehearsed before it meets one. Needs root.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: scripts/cluster/slurm.sh up|env|status|down [--name NAME]

  up      start munged, slurmctld and slurmd (one node with this machine's CPUs
          and memory, partition "vgpu") and wait until the node is idle
  env     print the exports for this shell: eval "$(scripts/cluster/slurm.sh env)"
  status  the daemons, the node and the queue
  down    cancel its jobs, stop exactly the daemons up started, remove its files
  --name NAME  the cluster (default vgpu; 1-8 of a-z0-9): several can be up at
          once. State lives in /run/vgpu-cluster/slurm-NAME.

example:
  scripts/cluster/slurm.sh up
  eval "$(scripts/cluster/slurm.sh env)"
  sbatch --wait --ntasks=4 scripts/slurm/cpu_only.sbatch configs/default.ini
  squeue                     # (no sacct: no accounting daemon)
  scripts/cluster/slurm.sh down
EOF
}

die() { echo "slurm.sh: $*" >&2; exit 1; }
bad_usage() { echo "slurm.sh: $*" >&2; echo "(scripts/cluster/slurm.sh --help)" >&2; exit 2; }

[ $# -ge 1 ] || { usage >&2; exit 2; }
cmd=$1
shift
name=vgpu
while [ $# -gt 0 ]; do
  case $1 in
    --name) name=${2:-}; shift 2 || bad_usage "--name needs a value" ;;
    -h|--help) usage; exit 0 ;;
    *) bad_usage "unknown argument '$1'" ;;
  esac
done
case $cmd in -h|--help|help) usage; exit 0 ;; esac
[[ $name =~ ^[a-z0-9]{1,8}$ ]] || bad_usage "--name '$name': 1 to 8 of a-z and 0-9"

T=/run/vgpu-cluster/slurm-$name
CONF=$T/slurm.conf
sl() { SLURM_CONF=$CONF "$@"; }

need_root() {
  [ "$(id -u)" = 0 ] || die "needs root (it runs slurmctld, slurmd and munged): run it with sudo"
  local c
  for c in slurmctld slurmd sbatch sinfo squeue scancel srun; do
    command -v "$c" >/dev/null || die "$c not found (apt-get install slurm-wlm)"
  done
  command -v munged >/dev/null || die "munged not found (apt-get install munge)"
  command -v ss >/dev/null || die "ss not found (apt-get install iproute2)"
}

# pid_alive FILE: the pid in FILE runs.
pid_alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

free_port() { # two free consecutive TCP ports
  local p
  for _ in $(seq 100); do
    p=$((20000 + RANDOM % 20000))
    [ -z "$(ss -Htan "sport = :$p")" ] && [ -z "$(ss -Htan "sport = :$((p + 1))")" ] && { echo $p; return; }
  done
  die "no two free consecutive TCP ports found"
}

cmd_up() {
  need_root
  ls /usr/lib/*/slurm*/mpi_pmix*.so >/dev/null 2>&1 ||
    die "Slurm's PMIx plugin (mpi_pmix.so) not found: srun --mpi=pmix would fail"
  [ -e "$T" ] && die "cluster '$name' is already up or was left half-made ($T): scripts/cluster/slurm.sh down --name $name"
  trap 'echo "slurm.sh: up failed; undoing (logs were in $T/log)" >&2; tail -5 "$T"/log/*.log >&2 2>/dev/null; cmd_down >/dev/null 2>&1 || true' ERR
  mkdir -p /run/vgpu-cluster
  chmod 0755 /run/vgpu-cluster # munged checks every directory above its socket
  mkdir -m 0755 "$T" "$T/munge-run"
  mkdir -m 0700 "$T/munge-etc" "$T/munge-lib" "$T/munge-log"
  mkdir "$T/ctld" "$T/slurmd" "$T/log"

  # munge: its own key and socket, so the machine's munge (if any) is untouched.
  dd if=/dev/urandom of="$T/munge-etc/munge.key" bs=1024 count=1 status=none
  chmod 0400 "$T/munge-etc/munge.key"
  local socket=$T/munge-run/munge.socket
  munged --key-file="$T/munge-etc/munge.key" --socket="$socket" --pid-file="$T/munge-run/munged.pid" \
    --seed-file="$T/munge-lib/seed" --log-file="$T/munge-log/munged.log"

  local port host
  port=$(free_port)
  host=$(hostname -s)
  cat >"$CONF" <<EOF
# A one-node cluster made by scripts/cluster/slurm.sh up --name $name
ClusterName=vgpu$name
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$socket
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
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=$(($(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 256)) State=UNKNOWN
PartitionName=vgpu Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
  # Both daemons detach and write their pid files; -i: ignore state from an
  # earlier cluster of this name. The mark in their environment (inherited by
  # slurmstepd) tells down what belongs to this cluster.
  local mark
  mark=$name-$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')
  echo "$mark" >"$T/mark"
  VGPU_SLURM_MARK=$mark slurmctld -i -f "$CONF"
  VGPU_SLURM_MARK=$mark slurmd -N "$host" -f "$CONF"
  local t0=$SECONDS
  until [ "$(sl sinfo -h -o %t 2>/dev/null)" = idle ]; do
    [ $((SECONDS - t0)) -lt 30 ] || { echo "slurm.sh: the node did not come up in 30 s: $(sl sinfo 2>&1)" >&2; false; }
    sleep 0.2
  done
  trap - ERR
  echo "slurm.sh: cluster '$name' up: node $host ($(nproc) CPUs), partition vgpu, port $port"
  echo "  in your shell: eval \"\$(scripts/cluster/slurm.sh env --name $name)\""
  echo "  then:          sbatch --ntasks=4 scripts/slurm/cpu_only.sbatch configs/default.ini; squeue"
  echo "  stop:          scripts/cluster/slurm.sh down --name $name"
}

cmd_env() {
  [ -f "$CONF" ] || die "cluster '$name' is not up (scripts/cluster/slurm.sh up --name $name)"
  echo "export SLURM_CONF=$CONF"
}

cmd_status() {
  if [ ! -f "$CONF" ]; then
    echo "slurm.sh: cluster '$name' is not up"
    return 0
  fi
  local d
  for d in munge-run/munged slurmctld slurmd; do
    if pid_alive "$T/$d.pid"; then echo "  ${d#*/}: running (pid $(cat "$T/$d.pid"))"
    else echo "  ${d#*/}: not running"; fi
  done
  sl sinfo 2>&1 | sed 's/^/  /'
  sl squeue 2>&1 | sed 's/^/  /'
}

# stop PIDFILE WHAT: TERM, then KILL after 10 s.
stop() {
  pid_alive "$1" || return 0
  local p
  p=$(cat "$1")
  kill "$p" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || return 0; sleep 0.1; done
  echo "slurm.sh: $2 (pid $p) did not stop in 10 s; killing it" >&2
  kill -9 "$p" 2>/dev/null || true
}

cmd_down() {
  need_root
  if [ ! -d "$T" ]; then
    echo "slurm.sh: cluster '$name' is not up; nothing to do"
    return 0
  fi
  if pid_alive "$T/slurmctld.pid"; then
    sl scancel --quiet --partition=vgpu 2>/dev/null || true
    for _ in $(seq 50); do [ -z "$(sl squeue -h 2>/dev/null)" ] && break; sleep 0.2; done
  fi
  local mark
  mark=$(cat "$T/mark" 2>/dev/null || echo none)
  # Jobs' steps are children of slurmd: it goes first, then what is left.
  stop "$T/slurmd.pid" slurmd
  stop "$T/slurmctld.pid" slurmctld
  # What is left of its jobs: slurmstepd (started by slurmd, so it carries the
  # daemons' mark) and job processes (the submitter's SLURM_CONF and a job id;
  # the user's own shell has no job id).
  local p e
  for p in $(ls /proc | grep -E '^[0-9]+$'); do
    [ "$p" = $$ ] && continue
    e=$(tr '\0' '\n' 2>/dev/null <"/proc/$p/environ") || continue
    if grep -qxF "VGPU_SLURM_MARK=$mark" <<<"$e" ||
       { grep -qxF "SLURM_CONF=$CONF" <<<"$e" && grep -q '^SLURM_JOB_ID=' <<<"$e"; }; then
      kill -9 "$p" 2>/dev/null || true
    fi
  done
  stop "$T/munge-run/munged.pid" munged
  rm -rf "$T"
  rmdir /run/vgpu-cluster 2>/dev/null || true
  echo "slurm.sh: cluster '$name' is down"
}

case $cmd in
  up) cmd_up ;;
  env) cmd_env ;;
  status) cmd_status ;;
  down) cmd_down ;;
  *) bad_usage "unknown command '$cmd' (up, env, status, down)" ;;
esac
