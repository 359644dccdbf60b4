#!/usr/bin/env bash
# mpirun.sh: mpirun with --allow-run-as-root / --oversubscribe added only when
# needed (running as root; more ranks than cores). Usage: mpirun.sh -np N prog args...
set -euo pipefail
extra=()
np=1
args=("$@")
# Read mpirun's own options only: everything from the program name on belongs
# to the program (whose -n or -c must not count as a rank count).
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[i]}" in
    -np|-n|--np|-c) np="${args[i+1]:-1}"; i=$((i + 1)) ;;
    --mca|-mca) i=$((i + 2)) ;;
    -x|-H|--host|--hostfile|-hostfile|--machinefile|--bind-to|--map-by|--rank-by|-wdir|--wdir) i=$((i + 1)) ;;
    -*) ;;
    *) break ;;
  esac
done
# Open MPI allows root only when both variables are 1 (as vgpurun decides).
if [ "$(id -u)" = 0 ] && ! { [ "${OMPI_ALLOW_RUN_AS_ROOT:-}" = 1 ] &&
                             [ "${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-}" = 1 ]; }; then
  extra+=(--allow-run-as-root)
fi
cores=$(nproc)
if [ "$np" -gt "$cores" ] 2>/dev/null; then
  extra+=(--oversubscribe)
fi
# Preemption: mpirun cannot forward SIGTERM or SIGINT (it answers them by
# killing the ranks: SIGCONT, then SIGTERM and SIGKILL odls_base_sigkill_timeout
# seconds apart, and exits 1), but it forwards SIGUSR1 at once. So the first
# TERM/INT becomes USR1: the ranks finish the step, checkpoint and exit 75,
# which mpirun passes on. A second one goes to mpirun as TERM: abort.
# mpirun stays in this script's process group, so signals sent to the whole
# group (a terminal's Ctrl-C, timeout(1)) still reach it directly and abort
# the job: a stop with a checkpoint is a signal to this script's PID.
mpirun "${extra[@]}" "$@" &
launcher=$!
stop_signals=0
on_stop_signal() {
  stop_signals=$((stop_signals + 1))
  if [ "$stop_signals" -eq 1 ]; then
    echo "mpirun.sh: stop requested: the ranks checkpoint and exit 75 (signal again to abort)" >&2
    kill -USR1 "$launcher" 2>/dev/null || true
  else
    kill -TERM "$launcher" 2>/dev/null || true
  fi
}
trap on_stop_signal TERM INT
rc=0
while :; do
  wait "$launcher" && rc=0 || rc=$?
  kill -0 "$launcher" 2>/dev/null || break # else a trap cut the wait short
done
# The last wait may have been cut short just as mpirun ended: ask again.
if [ "$rc" -gt 128 ]; then
  wait "$launcher" && rc=0 || { status=$?; [ "$status" -eq 127 ] || rc=$status; }
fi
exit "$rc"
