#!/usr/bin/env bash
# mpirun.sh: mpirun with --allow-run-as-root / --oversubscribe added only when
# needed (running as root; more ranks than cores). Usage: mpirun.sh -np N prog args...
set -euo pipefail
extra=()
np=1
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[i]}" in
    -np|-n|--np|-c) np="${args[i+1]:-1}" ;;
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
