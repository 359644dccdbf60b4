# faults_lib.sh: helpers for the fault tests (sourced after lib.sh): a
# training job in the background, its ranks by number, and checks that it
# left nothing behind. Every process of a job carries $WORK in its command
# line (the checkpoint directory), which is how they are found and cleaned up.
FAULT_CONFIG="$CONFIGS/synthetic_small.ini"
# Long enough never to finish during a test; a checkpoint every 20 steps.
FAULT_ARGS=(--quiet --set train.epochs=100000 --set checkpoint.every_steps=20)

# Kills whatever of our jobs is still running (ranks sit in their own process
# groups, so mpirun's group is not enough), then removes $WORK and $SHM_DIR.
# What expect_nothing_left found in /dev/shm is removed too (after being
# reported), so that a failing run does not fill /dev/shm run after run.
fault_cleanup() {
  pkill -9 -f -- "$WORK" 2>/dev/null
  local f
  for f in $(cat "$WORK/shm.leaked" 2>/dev/null); do rm -f "$f"; done
  rm -rf "$WORK" "$SHM_DIR"
}
trap fault_cleanup EXIT

# start_job NAME NP ARGS...: vgpu_train in the background with checkpoints in
# $WORK/NAME, under $FAULT_LAUNCHER (default scripts/mpirun.sh); sets $job
# (the launcher's pid), $job_out, $ckdir, and records /dev/shm so that
# expect_nothing_left can tell what this job added.
start_job() {
  local name=$1 np=$2
  shift 2
  ckdir="$WORK/$name"
  job_out="$WORK/$name.out"
  shm_now >"$WORK/shm.before"
  "${FAULT_LAUNCHER:-$MPIRUN}" -np "$np" "$TRAIN" "$FAULT_CONFIG" "${FAULT_ARGS[@]}" --set "checkpoint.dir=$ckdir" "$@" \
    >"$job_out" 2>&1 &
  job=$!
  echo "--- $name: started $np ranks (launcher pid $job)"
}

# rank_pid R: pid of rank R of the running job (empty when there is none).
rank_pid() {
  local p
  for p in $(pgrep -f -- "$ckdir"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1" && echo "$p"
  done
}

# wait_for_checkpoints COUNT TIMEOUT_S: until ckdir holds COUNT finished checkpoints.
wait_for_checkpoints() {
  local deadline=$((SECONDS + $2))
  while [ "$SECONDS" -lt "$deadline" ]; do
    [ "$(ls "$ckdir" 2>/dev/null | grep -c '^ckpt-[0-9]*\.bin$')" -ge "$1" ] && return 0
    kill -0 "$job" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# wait_for_checkpoint_after PATH TIMEOUT_S: until ckdir holds a finished
# checkpoint newer than PATH (counting would not do: only the newest
# checkpoint.keep_last stay).
wait_for_checkpoint_after() {
  local deadline=$((SECONDS + $2)) newest
  while [ "$SECONDS" -lt "$deadline" ]; do
    newest=$(latest_checkpoint)
    [ -n "$newest" ] && [ "$newest" \> "$1" ] && return 0
    kill -0 "$job" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# latest_checkpoint: the finished checkpoint with the highest step.
latest_checkpoint() { ls "$ckdir" 2>/dev/null | grep '^ckpt-[0-9]*\.bin$' | sort | tail -1 | sed "s|^|$ckdir/|"; }

# mark: the moment the fault is injected; wait_job measures from here.
mark() { t_mark=$(date +%s.%N); }

# wait_job LIMIT_S: waits for the launcher; sets $rc (124 and a kill -9 when it
# outlives the limit), $secs since mark, and $out (its output).
wait_job() {
  local deadline
  deadline=$(echo "$t_mark + $1" | bc)
  while kill -0 "$job" 2>/dev/null && [ "$(echo "$(date +%s.%N) < $deadline" | bc)" = 1 ]; do
    sleep 0.05
  done
  if kill -0 "$job" 2>/dev/null; then
    # One SIGTERM to mpirun itself ends the job in order (its shared-memory
    # files go too); SIGKILL only if that fails.
    local launcher
    launcher=$( (pgrep -x mpirun -P "$job"; [ "$(ps -o comm= -p "$job")" = mpirun ] && echo "$job") | head -1)
    [ -n "$launcher" ] && kill -TERM "$launcher" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$job" 2>/dev/null
    pkill -9 -f -- "$ckdir" 2>/dev/null
    wait "$job" 2>/dev/null
    rc=124
  else
    wait "$job"
    rc=$?
  fi
  secs=$(echo "$(date +%s.%N) - $t_mark" | bc)
  out=$(cat "$job_out")
  echo "--- job ended: exit $rc after ${secs}s"
}

# expect_nothing_left: no process of the job (after 3 s for ranks that
# outlive mpirun to go), no new shared-memory file of vgpu's (/dev/shm) or
# of Open MPI's transport (the test's $SHM_DIR, lib.sh) that no process maps,
# no temp file.
expect_nothing_left() {
  local procs left="" f i
  for i in $(seq 30); do
    procs=$(pgrep -f -- "$ckdir")
    [ -z "$procs" ] && break
    sleep 0.1
  done
  if [ -z "$procs" ]; then ok "no process left"; else bad "processes left: $(ps -o pid,args -p $(echo $procs | tr ' ' ,))"; fi
  left=$(shm_left "$(cat "$WORK/shm.before")" | tr '\n' ' ')
  echo "$left" >>"$WORK/shm.leaked"
  if [ -z "$left" ]; then ok "nothing of the job left in shared memory"; else bad "left in shared memory: $left"; fi
  left=$(ls "$ckdir" 2>/dev/null | grep '\.tmp' || true)
  if [ -z "$left" ]; then ok "no temp file in $ckdir"; else bad "temp files left: $left"; fi
}

# expect_checkpoints_intact: the newest finished checkpoint (the one a fault
# could have caught half-written) passes --resume's checks (a damaged one is
# refused with exit 2) and training goes on from it for a few steps.
expect_checkpoints_intact() {
  local ck newest step
  newest=$(latest_checkpoint)
  if [ -z "$newest" ]; then bad "no checkpoint in $ckdir"; return; fi
  step=$(basename "$newest" .bin | sed 's/^ckpt-0*//')
  run "resume $(basename "$newest")" 60 "$MPIRUN" -np 2 "$TRAIN" "$FAULT_CONFIG" --quiet \
    --set train.epochs=100000 --set "train.max_steps=$((step + 10))" --resume "$newest"
  expect_rc 0
  expect_out "status=ok"
}

# expect_flight_verdict RANK STATE: the job printed the flight recorder's
# verdict: a collective by number that RANK (STATE: stopped, dead) and no
# other rank did not enter, or that it alone holds up (a list with another,
# wrong rank in it fails); and vgpu-flight, reading the records the job
# names, prints the same verdict.
expect_flight_verdict() {
  local rank=$1 state=$2 online dir offline frc
  local who="rank $rank \($state\)"
  expect_out "flight recorder: (collective #[0-9]+ \([^)]*\) was not entered by ($who; the others entered it|[^;]*; the others entered it; held up by $who)|every rank entered collective #[0-9]+ [^;]*; it has not finished on [^;]*; held up by $who)(\$|; no record of)"
  online=$(grep -m1 -oE 'flight recorder: (collective|every rank) .*' <<<"$out")
  dir=$(grep -m1 -oE 'flight recorder: records in [^ ]+' <<<"$out" | sed 's/.* in //')
  if [ -z "$dir" ]; then bad "the job did not say where its flight records are"; return; fi
  offline=$("$FLIGHT" "$dir" 2>&1)
  frc=$?
  if [ "$frc" = 3 ] && grep -qxF -- "$online" <<<"$offline"; then
    ok "vgpu-flight $dir: the same verdict (exit 3)"
  else
    bad "vgpu-flight $dir (exit $frc) said: $offline; the job said: $online"
  fi
}
