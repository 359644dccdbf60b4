#!/usr/bin/env bash
# flight_inspect.sh: SIGUSR2 to a running job (to the launcher, which passes
# it to every rank) asks "what is it doing?": every rank prints its phase and
# its last collectives and writes its flight record, and the job goes on: it
# checkpoints afterwards and stops in order when asked (SIGUSR1). A second
# look later finds the ranks further on.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/faults_lib.sh"

# look N: sends SIGUSR2 to the launcher; waits until all 4 ranks answered for
# the Nth time (at most 10 s).
look() {
  kill -USR2 "$job"
  for _ in $(seq 100); do
    [ "$(grep -c 'flight recorder (SIGUSR2): ' "$job_out")" -ge $((4 * $1)) ] && return 0
    sleep 0.1
  done
  return 1
}

start_job inspect 4 --set train.max_steps=60000
if ! wait_for_checkpoints 1 30; then
  out=$(cat "$job_out"); bad "no checkpoint within 30 s"; finish; exit
fi
look 1 || { out=$(cat "$job_out"); bad "not every rank answered SIGUSR2 within 10 s"; }
out=$(cat "$job_out")
for r in 0 1 2 3; do
  expect_out "^\[rank $r@[^]]+\] flight recorder \(SIGUSR2\): step [0-9]+, in ([a-z]+|collective #[0-9]+ [a-z+-]+); the last collectives:"
done
expect_out '^\[rank 0@[^]]+\]   #[0-9]+ (all-reduce|control-[a-z]+)[^ ]* [0-9]+ bytes (done|issued|waiting)'
records=$(ls "$VGPU_FLIGHT_DIR"/*/*.flight 2>/dev/null | wc -l)
if [ "$records" = 4 ]; then ok "4 records written"; else bad "$records records in $VGPU_FLIGHT_DIR"; fi
first=$(grep -m1 -oE '^\[rank 0@[^]]+\]   #[0-9]+' "$job_out" | grep -oE '[0-9]+$')

# The job went on: another checkpoint, and a second look further on.
if wait_for_checkpoint_after "$(latest_checkpoint)" 30; then ok "a checkpoint after the look"; else bad "no checkpoint after SIGUSR2"; fi
look 2 || bad "no answer to the second SIGUSR2"
out=$(cat "$job_out")
second=$(grep -oE '^\[rank 0@[^]]+\]   #[0-9]+' "$job_out" | tail -1 | grep -oE '[0-9]+$')
if [ -n "$first" ] && [ -n "$second" ] && [ "$second" -gt "$first" ]; then
  ok "rank 0 went on from collective #$first to #$second"
else bad "collectives '$first' then '$second'"; fi
offline=$("$FLIGHT" "$VGPU_FLIGHT_DIR" 2>&1)
frc=$?
if [ "$frc" != 2 ] && grep -q '^flight records: .*(4 of 4 ranks)' <<<"$offline"; then
  ok "vgpu-flight reads the looks' records (exit $frc)"
else bad "vgpu-flight (exit $frc): $offline"; fi

mark
kill -USR1 "$job"
wait_job 30
expect_rc 75
expect_out 'vgpu_train: preempted at step [0-9]+'
expect_no_out 'flight recorder: (collective|every rank)'
expect_nothing_left
finish
