#!/usr/bin/env bash
# inject.sh: the faults a user injects (VGPU_INJECT_*, docs/TROUBLESHOOTING.md: Injecting
# faults), each with the job's reaction: a rank that kills itself at a step
# ends the job, named, with nothing left; a rank that hangs at a step is named
# by the others at comm.timeout_s; a step drawn from a seed is said and is the
# step that strikes; a step the run does not reach is said and nothing happens.
# (VGPU_INJECT_SLOW: balance.sh; VGPU_INJECT_PERTURB: verify.sh.)
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/faults_lib.sh"
timeout_s=4

# start_injected NAME NP VAR=VALUE ARGS...: the fault job with VAR set.
start_injected() {
  local name=$1 np=$2 var=$3
  shift 3
  mark
  export "${var?}"
  start_job "$name" "$np" "$@"
  unset "${var%%=*}"
}

start_injected kill 4 VGPU_INJECT_KILL=2@30
wait_job 40
expect_nonzero
expect_out '^\[rank 2@[^]]+\] warning: VGPU_INJECT_KILL: rank 2 \(pid [0-9]+\) kills itself after step 30$'
expect_out '^mpirun.sh: a rank was killed by signal 9 \(KILL\) and mpirun ended the job'
expect_nothing_left

start_injected hang 4 VGPU_INJECT_HANG=1@25 --set comm.timeout_s=$timeout_s
wait_job 40
expect_nonzero
expect_out 'VGPU_INJECT_HANG: rank 1 \(pid [0-9]+\) stops itself after step 25 \(kill -CONT [0-9]+ resumes it\)'
expect_out "collective timed out after [0-9.]+ s waiting for rank (1 |[0-9]+ .*rank 1 .*furthest behind)"
expect_nothing_left

# A seeded random step: said before, struck at. max_steps bounds the draw.
start_injected random 2 VGPU_INJECT_KILL=1@random:42 --set train.max_steps=60
wait_job 40
expect_nonzero
drawn=$(grep -oE 'VGPU_INJECT_KILL: rank 1, after step [0-9]+ \(drawn from seed 42 among steps 1\.\.60' <<<"$out" |
        grep -oE 'after step [0-9]+' | grep -oE '[0-9]+')
if [ -n "$drawn" ] && [ "$drawn" -ge 1 ] && [ "$drawn" -le 60 ]; then
  ok "seed 42 drew step $drawn of 1..60"
  expect_out "VGPU_INJECT_KILL: rank 1 \(pid [0-9]+\) kills itself after step $drawn\$"
else
  bad "no drawn step said"
fi
expect_out 'VGPU_INJECT_KILL=1@random:42 repeats it'
expect_nothing_left

# A step beyond the run: said, and the job finishes.
start_injected beyond 2 VGPU_INJECT_KILL=0@500 --set train.max_steps=40
wait_job 40
expect_rc 0
expect_out 'VGPU_INJECT_KILL: step 500 is not among this run.s steps 1\.\.40; nothing injected'
expect_out 'status=ok'

# A slow rank: the step-time breakdown names it the slowest, with about
# FACTOR times the compute, and the other rank waits for it.
run "slow rank 1 (x4): the breakdown" 60 env VGPU_INJECT_SLOW=1:4 "$MPIRUN" -np 2 "$TRAIN" \
  "$FAULT_CONFIG" --set train.max_steps=60 --set devices.cpu_threads=1
expect_rc 0
expect_out '^  slowest rank 1 '
expect_out '^  fastest rank 0 '
bd=$(grep -oE 'step_ms=[^ ]+' <<<"$out" | cut -d= -f2)
IFS='/@,' read -r c1 w1 m1 o1 r1 c0 w0 m0 o0 r0 <<<"$bd"
echo "--- step_ms: $bd"
if [ "$r1" = r1 ] && [ "$r0" = r0 ] && [ "$(echo "$c1 > 2 * $c0 && $w0 > $w1" | bc -l)" = 1 ]; then
  ok "rank 1 computes ${c1} ms a step against rank 0's ${c0}; rank 0 waits ${w0} ms against ${w1}"
else
  bad "breakdown does not show the slow rank: $bd"
fi

# A malformed value is said and ignored.
run "malformed" 60 env VGPU_INJECT_HANG=1@soon "$MPIRUN" -np 2 "$TRAIN" "$FAULT_CONFIG" --quiet \
  --set train.max_steps=10
expect_rc 0
expect_out 'ignoring VGPU_INJECT_HANG=1@soon: expected RANK@STEP \(STEP >= 1\), RANK@random or RANK@random:SEED'
finish
