#!/usr/bin/env bash
# flight_places.sh: where flight records go, and when. They belong to faults
# (a dead or hung rank, a timeout, SIGUSR2), not to a configuration refusal
# or a stop someone asked for; by default they go to a directory of this
# user's under $TMPDIR (never the working directory, the user's source tree),
# said in one line, with no temporary file left; VGPU_FLIGHT_DIR picks the
# place; a default directory that is not this user's alone is refused.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/faults_lib.sh"
unset VGPU_FLIGHT_DIR # lib.sh's: this test is about the default
export TMPDIR=$WORK/tmp
mkdir -p "$TMPDIR" "$WORK/cwd"
cd "$WORK/cwd" || exit 1
default_root=$TMPDIR/vgpu-flight-$(id -u)

# expect_cwd_empty: the working directory (where a user runs from) holds nothing.
expect_cwd_empty() {
  local left
  left=$(ls -A "$WORK/cwd")
  if [ -z "$left" ]; then ok "nothing written in the working directory"
  else bad "left in the working directory: $left"; fi
}
# expect_no_records: no record anywhere in the default place.
expect_no_records() {
  local left
  left=$(find "$TMPDIR" -mindepth 1 2>/dev/null | head -5)
  if [ -z "$left" ]; then ok "no flight records (nothing under \$TMPDIR)"
  else bad "flight records for no fault: $left"; fi
}

# A configuration refusal (exit 2, agreed): --plan refusing a cap, as in the
# issue's 8 of 8 tries; every rank exits 2 and mpirun stops the last ones.
for i in 1 2 3; do
  run "--plan refuses a cap (try $i)" 60 "$MPIRUN" -np 4 "$TRAIN" "$FAULT_CONFIG" --plan \
    --set devices.memory_limit=1K
  expect_rc 2
done
expect_no_out 'flight recorder'
expect_cwd_empty
expect_no_records

# A stop someone asked for (SIGTERM to the launcher: checkpoint, exit 75).
start_job stop 4
if wait_for_checkpoints 1 30; then
  mark
  kill -TERM "$job"
  wait_job 20
  expect_rc 75
  expect_no_out 'flight recorder'
else
  out=$(cat "$job_out"); bad "stop: no checkpoint within 30 s"
fi
expect_cwd_empty
expect_no_records

# A fault (a rank killed): records under $TMPDIR/vgpu-flight-UID/<job>/, one
# line says where, and nothing but records is there.
start_job dead 4
if wait_for_checkpoints 1 30; then
  victim=$(rank_pid 1)
  mark
  kill -9 "$victim"
  wait_job 30
  expect_nonzero
  expect_out "flight recorder: records in $default_root/[0-9]{8}-[0-9]{6}-[0-9]+ \(vgpu-flight "
  dir=$(grep -m1 -oE 'flight recorder: records in [^ ]+' <<<"$out" | sed 's/.* in //')
  records=$(ls "$dir" 2>/dev/null | grep -c '^rank[0-3]-.*\.flight$')
  if [ "$records" = 4 ]; then ok "4 records in $dir"; else bad "$records records in '$dir'"; fi
  others=$(ls -A "$dir" 2>/dev/null | grep -v '^rank[0-3]-.*\.flight$')
  if [ -z "$others" ]; then ok "no temporary file beside them"; else bad "also in $dir: $others"; fi
  mode=$(stat -c %a "$default_root" 2>/dev/null)
  if [ "$mode" = 700 ]; then ok "$default_root is 0700"; else bad "$default_root has mode $mode"; fi
  if [ "$(grep -c 'flight recorder: records in ' <<<"$out")" = 1 ]; then ok "said in one line"
  else bad "'records in' said $(grep -c 'flight recorder: records in ' <<<"$out") times"; fi
else
  out=$(cat "$job_out"); bad "dead: no checkpoint within 30 s"
fi
expect_cwd_empty

# VGPU_FLIGHT_DIR picks the place.
VGPU_FLIGHT_DIR=$WORK/mine start_job chosen 4
if wait_for_checkpoints 1 30; then
  victim=$(rank_pid 2)
  mark
  kill -9 "$victim"
  wait_job 30
  expect_out "flight recorder: records in $WORK/mine/[0-9]{8}-"
else
  out=$(cat "$job_out"); bad "chosen: no checkpoint within 30 s"
fi

# A default directory someone else made (or anyone may write) is not used.
if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1; then
  rm -rf "$default_root"
  mkdir -m 0777 "$default_root"
  chown nobody "$default_root"
  start_job planted 4
  if wait_for_checkpoints 1 30; then
    victim=$(rank_pid 1)
    mark
    kill -9 "$victim"
    wait_job 30
    expect_out "flight recorder: $default_root is not a directory of this user's alone; no records"
    left=$(ls -A "$default_root")
    if [ -z "$left" ]; then ok "nothing written into the planted directory"
    else bad "written into the planted directory: $left"; fi
  else
    out=$(cat "$job_out"); bad "planted: no checkpoint within 30 s"
  fi
else
  echo "SKIP: the planted-directory case (needs root and user nobody)"
fi
finish
