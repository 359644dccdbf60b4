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
if [ "$(id -u)" = 0 ] && [ -z "${OMPI_ALLOW_RUN_AS_ROOT:-}" ]; then
  extra+=(--allow-run-as-root)
fi
cores=$(nproc)
if [ "$np" -gt "$cores" ] 2>/dev/null; then
  extra+=(--oversubscribe)
fi
exec mpirun "${extra[@]}" "$@"
