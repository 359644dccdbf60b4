#!/usr/bin/env bash
# mpirun.sh: mpirun with --allow-run-as-root / --oversubscribe added only when
# needed (running as root; more ranks than cores), -q on one host, and the
# live progress bar asked for on a terminal. Usage: mpirun.sh -np N prog args...
# Stop signals are taken from here on: one that comes before mpirun runs is
# a request like any other (held until it can reach the ranks, below), not
# the end of this script (which would leave mpirun to its parent-death
# signal: exit 143, no checkpoint). Noted at once, handled once defined.
early_stops=()
trap 'early_stops+=(TERM)' TERM
trap 'early_stops+=(INT)' INT
trap 'early_stops+=(USR1)' USR1
set -euo pipefail
launcher=
# A stop request (USR1 to mpirun) is held until it can reach every rank:
# until mpirun catches USR1 (before that USR1 kills mpirun: exit 138) and its
# ranks exist and catch it too (mpirun forwards USR1 only to ranks that exist,
# so a request sent before is lost and the job runs on; a rank that has not
# yet reached its handler dies of it). On one host the ranks are mpirun's
# children: np of them, each running its own program (a child still running
# mpirun's copy has not exec'd yet), each catching USR1. A program that
# never catches USR1 gets it after HOLD_S anyway (what USR1 does to it is its
# own affair).
hold_s=10
stop_pending=0
pending_since_s=0
# Only builtins below (no ps, grep, readlink): the check runs every 50 ms
# while the ranks start, and with ranks spinning on every core a fork took
# long enough to let them reach their first steps before the request.
# catches_usr1 PID: the process has a handler for SIGUSR1 (bit 10 of SigCgt).
catches_usr1() {
  local key value
  while read -r key value; do
    if [ "$key" = SigCgt: ]; then
      (( (16#$value >> 9) & 1 ))
      return
    fi
  done 2>/dev/null <"/proc/$1/status"
  return 1
}
ranks_ready() {
  catches_usr1 "$launcher" || return 1
  local kids=0 list pid stat task
  for task in "/proc/$launcher"/task/*/children; do
    list=()
    read -r -a list 2>/dev/null <"$task" # (no newline at its end: read says EOF)
    for pid in "${list[@]}"; do
      read -r stat 2>/dev/null <"/proc/$pid/stat" || continue
      stat=${stat##*) }
      [[ $stat == [ZX]* ]] && continue
      # (a child still running mpirun's own image has not exec'd yet)
      [ "/proc/$pid/exe" -ef "/proc/$launcher/exe" ] && return 1
      [ "$hosts" = 1 ] || catches_usr1 "$pid" || return 1
      kids=$((kids + 1))
    done
  done
  if [ "$hosts" = 0 ] && [ "$app" = 0 ] && [[ $np =~ ^[0-9]+$ ]]; then
    [ "$kids" -ge "$np" ]
  else
    [ "$kids" -ge 1 ]
  fi
}
# deliver_stop: sends the held request if it can reach the ranks now (or the
# hold is over and mpirun at least takes USR1).
deliver_stop() {
  [ "$stop_pending" = 1 ] && [ -n "$launcher" ] || return 0
  if ranks_ready || { [ $((SECONDS - pending_since_s)) -ge "$hold_s" ] && catches_usr1 "$launcher"; }; then
    stop_pending=0
    kill -USR1 "$launcher" 2>/dev/null || true
  fi
}
request_stop() {
  stop_pending=1
  pending_since_s=$SECONDS
  deliver_stop
}
stop_signals=0
first_stop_us=0
on_stop_signal() {
  local now_us=${EPOCHREALTIME/[.,]/} n=$stop_signals
  stop_signals=$((n + 1)) # first: a signal that lands while this runs sees it
  if [ "$n" -eq 0 ]; then
    first_stop_us=$now_us
    echo "mpirun.sh: stop requested: the ranks checkpoint and exit 75 (signal again to abort)" >&2
    request_stop
  elif [ $((now_us - first_stop_us)) -lt 1000000 ]; then
    stop_signals=$n # the same request twice
  elif [ -z "$launcher" ]; then
    echo "mpirun.sh: aborted before mpirun started" >&2
    exit $((128 + $(kill -l "$1")))
  else
    stop_pending=0
    kill -TERM "$launcher" 2>/dev/null || true
  fi
}
trap 'on_stop_signal TERM' TERM
trap 'on_stop_signal INT' INT
# USR1 (checkpoint and stop: held as above) and USR2 (each rank says what it
# is doing: the flight recorder) go to mpirun; it forwards both to the ranks.
trap request_stop USR1
trap '[ -z "$launcher" ] || kill -USR2 "$launcher" 2>/dev/null || true' USR2
for sig in "${early_stops[@]}"; do
  if [ "$sig" = USR1 ]; then request_stop; else on_stop_signal "$sig"; fi
done
extra=()
np=1
hosts=0 # -H / --hostfile given: the job may span hosts
app=0   # --app FILE names the programs
args=("$@")
# Read mpirun's own options only: everything from the program name on belongs
# to the program (whose -n or -c must not count as a rank count).
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[i]}" in
    -np|-n|--np|-c) np="${args[i+1]:-1}"; i=$((i + 1)) ;;
    --mca|-mca|--gmca|-gmca) i=$((i + 2)) ;;
    -H|--host|-host|--hostfile|-hostfile|--machinefile|-machinefile|--rankfile|-rf) hosts=1; i=$((i + 1)) ;;
    # mpirun's options that take a value (Open MPI 4 and 5), so that the
    # value is not taken for the program.
    -x|--bind-to|--map-by|--rank-by|-wdir|--wdir|--output-filename|-output-filename|\
    -N|-npernode|--npernode|-npersocket|--npersocket|--timeout|--prefix|--path|\
    --preload-files|--cpus-per-proc|--cpus-per-rank|-am|--am|--tune|--report-pid|\
    --report-uri|--stdin|--personality) i=$((i + 1)) ;;
    --app|-app) app=1; i=$((i + 1)) ;;
    -*) ;;
    *) break ;;
  esac
done
program=${args[i]:-}
# What mpirun would report only after starting every daemon (and not at all
# under -q): a program that is not there. As the shell does: 127, or 126.
if [ "$app" = 1 ]; then
  : # the programs are in the app file
elif [ -z "$program" ]; then
  echo "mpirun.sh: no program to run (usage: mpirun.sh -np N PROGRAM ARGS...)" >&2
  exit 2
elif [[ $program == */* ]]; then
  if [ ! -e "$program" ]; then
    echo "mpirun.sh: $program: No such file or directory" >&2; exit 127
  elif [ -d "$program" ] || [ ! -x "$program" ]; then
    echo "mpirun.sh: $program: not executable" >&2; exit 126
  fi
elif ! command -v "$program" >/dev/null; then
  echo "mpirun.sh: $program: command not found (not on PATH; a program here needs ./)" >&2
  exit 127
fi
# Open MPI allows root only when both variables are 1 (as vgpurun decides).
if [ "$(id -u)" = 0 ] && ! { [ "${OMPI_ALLOW_RUN_AS_ROOT:-}" = 1 ] &&
                             [ "${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-}" = 1 ]; }; then
  extra+=(--allow-run-as-root)
fi
cores=$(nproc)
if [ "$np" -gt "$cores" ] 2>/dev/null; then
  extra+=(--oversubscribe)
fi
# Open MPI 4's mpirun will not start without an ssh or rsh on the PATH, even
# with every rank local (containers often have none): name a harmless one.
# (An executable file on the PATH, as mpirun looks: bash's command -v also
# names a file that cannot run.)
on_path() {
  local d IFS=:
  for d in $PATH; do [ -f "$d/$1" ] && [ -x "$d/$1" ] && return 0; done
  return 1
}
if [ "$hosts" = 0 ] && [ -z "${OMPI_MCA_plm_rsh_agent+set}" ] && ! on_path ssh && ! on_path rsh; then
  export OMPI_MCA_plm_rsh_agent=false
fi
# mpirun -q drops the 10-line report mpirun adds after every non-zero exit
# (the ranks have said why). On one host what else -q hides is checked above
# (program) or here (slots), and a rank killed by a signal is told below;
# across hosts the reports name the host, so they stay, and
# VGPU_MPIRUN_REPORT=1 keeps them anyway.
quiet=0
if [ "$hosts" = 0 ] && [ "${VGPU_MPIRUN_REPORT:-}" != 1 ]; then
  quiet=1
  extra+=(-q)
fi
# The ranks' stdout is a pipe: when ours is a terminal, tell them so, and its
# width (vgpu_train draws its live bar; the user's own VGPU_TERMINAL wins).
if [ -t 1 ] && [ -z "${VGPU_TERMINAL:-}" ]; then
  exec 4>&1
  size=$(stty size <&4 2>/dev/null || true)
  exec 4>&-
  export VGPU_TERMINAL=1 COLUMNS=${COLUMNS:-${size#* }}
  [ -n "$COLUMNS" ] || COLUMNS=80
  extra+=(-x VGPU_TERMINAL -x COLUMNS)
fi
# Preemption: mpirun cannot forward SIGTERM or SIGINT (it answers them by
# killing the ranks: SIGCONT, then SIGTERM and SIGKILL odls_base_sigkill_timeout
# seconds apart, and exits 1), but it forwards SIGUSR1 at once. So the first
# TERM/INT becomes USR1: the ranks finish the step, checkpoint and exit 75,
# which mpirun passes on. A second one, a second or more later, goes to
# mpirun as TERM: abort (one sooner is the same request twice, as for the
# ranks: a double Ctrl-C).
# mpirun gets a session of its own, so that a signal to this script's process
# group (a terminal's Ctrl-C, timeout(1)) reaches the script alone and takes
# the checkpoint path; if the script dies, mpirun gets SIGTERM (its parent-
# death signal) and ends the job.
session=()
command -v setsid >/dev/null && session=(setsid)
setpriv --pdeathsig TERM true 2>/dev/null && session=(setpriv --pdeathsig TERM "${session[@]}")
"${session[@]}" mpirun "${extra[@]}" "$@" &
launcher=$!
# Open MPI's mpirun can hang once its ranks are gone (seen when a rank dies
# inside MPI_Init: "PMIX ERROR: UNREACHABLE", then nothing, even to SIGTERM).
# So when mpirun has had children (the ranks, or the agents that start them
# on other hosts) and then none for VGPU_MPIRUN_ORPHAN_S seconds (default 5),
# it is ended, and said (0 turns the watch off).
orphan_s=${VGPU_MPIRUN_ORPHAN_S:-5}
if [[ $orphan_s =~ ^[0-9]{1,5}$ ]] && [ $((10#$orphan_s)) -le 86400 ]; then
  orphan_s=$((10#$orphan_s))
else
  echo "mpirun.sh: warning: VGPU_MPIRUN_ORPHAN_S='$orphan_s' is not whole seconds from 0 to 86400;" \
       "using 5" >&2
  orphan_s=5
fi
watch_orphaned_mpirun() {
  local seen=0 idle=0 limit=$((orphan_s * 4)) kids
  while kill -0 "$launcher" 2>/dev/null; do
    # (a dead rank a hung mpirun has not reaped is no child: zombies left out;
    # ps's output taken whole, as grep -q in a pipe would fail it early)
    kids=$(ps -o stat= --ppid "$launcher" 2>/dev/null || true)
    if [ -n "$kids" ] && grep -qv '^ *Z' <<<"$kids"; then
      seen=1 idle=0
    elif [ "$seen" = 1 ]; then
      idle=$((idle + 1))
      if [ "$idle" -ge "$limit" ]; then
        echo "mpirun.sh: mpirun is still running $orphan_s s after its last rank" \
             "ended: ending it (an Open MPI hang)" >&2
        kill -TERM "$launcher" 2>/dev/null || true
        for _ in 1 2 3 4 5 6 7 8; do
          kill -0 "$launcher" 2>/dev/null || exit 3
          sleep 0.25
        done
        kill -KILL "$launcher" 2>/dev/null || true
        exit 3 # said: mpirun's exit status is then not a rank's signal
      fi
    fi
    sleep 0.25
  done
}
watcher=
if [ "$orphan_s" -gt 0 ] && command -v ps >/dev/null; then
  watch_orphaned_mpirun &
  watcher=$!
fi
rc=0
while :; do
  if [ "$stop_pending" = 1 ]; then
    # Polling while a stop is held (a trap waits for sleep to end: 50 ms).
    deliver_stop
    kill -0 "$launcher" 2>/dev/null || { wait "$launcher" && rc=0 || rc=$?; break; }
    sleep 0.05
    continue
  fi
  wait "$launcher" && rc=0 || rc=$?
  kill -0 "$launcher" 2>/dev/null || break # else a trap cut the wait short
done
# The last wait may have been cut short just as mpirun ended: ask again.
if [ "$rc" -gt 128 ]; then
  wait "$launcher" && rc=0 || { status=$?; [ "$status" -eq 127 ] || rc=$status; }
fi
# The watcher ends within a poll of mpirun's end.
ended_hung=0
if [ -n "$watcher" ]; then
  wait "$watcher" 2>/dev/null || { [ $? = 3 ] && ended_hung=1; } || true
fi
if [ "$quiet" = 1 ] && [ "$stop_signals" = 0 ] && [ "$ended_hung" = 0 ] && [ "$rc" -gt 128 ] &&
   [ "$rc" -lt 193 ]; then
  echo "mpirun.sh: a rank was killed by signal $((rc - 128)) ($(kill -l "$rc")) and mpirun ended" \
       "the job (exit $rc); VGPU_MPIRUN_REPORT=1 keeps mpirun's report, which names the rank" >&2
fi
exit "$rc"
