#!/usr/bin/env bash
# preempt.sh: SIGTERM or SIGINT to the launcher (what Slurm or a user sends
# before killing a job), or Ctrl-C (SIGINT to the launcher's process group):
# the ranks stop within 10 steps, write a checkpoint and the launcher exits 75
# ("preempted, resumable") naming it; the checkpoint resumes and nothing is
# left behind. A stop during start-up exits 75 too ("stopped before the first
# step"). Two signals within a second are one request; a second one later
# aborts: non-zero at once, nothing left, no finished checkpoint damaged.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/faults_lib.sh"
# Job control: background jobs keep SIGINT (a shell without it starts them
# with SIGINT ignored, and an ignored signal cannot be trapped).
set -m

# preempt_once NAME SIGNAL: the single-signal scenario.
preempt_once() {
  local name=$1 sig=$2 before ckpt step
  start_job "$name" 4
  if ! wait_for_checkpoints 1 30; then
    out=$(cat "$job_out"); bad "$name: no checkpoint within 30 s"; return
  fi
  before=$(latest_checkpoint)
  mark
  kill "-$sig" "$job"
  wait_job 20
  expect_rc 75
  expect_no_banner
  expect_within 10
  expect_out "vgpu_train: preempted at step [0-9]+ \(signal SIG(TERM|INT|USR1)\).*resumable: --resume "
  ckpt=$(sed -n 's/.*resumable: --resume \([^ ]*\).*/\1/p' <<<"$out" | tail -1)
  step=$(sed -n 's/.*preempted at step \([0-9]*\) .*/\1/p' <<<"$out" | tail -1)
  if [ -n "$ckpt" ] && [ -f "$ckpt" ] && [ "$ckpt" \> "$before" ]; then
    ok "new checkpoint $(basename "$ckpt") (the last before the signal: $(basename "$before"))"
  else
    bad "no new checkpoint: printed '$ckpt', last before the signal $(basename "$before")"
  fi
  expect_nothing_left
  [ -n "$ckpt" ] && [ -f "$ckpt" ] || return
  run "$name: resume the printed checkpoint" 60 "$MPIRUN" -np 2 "$TRAIN" "$FAULT_CONFIG" --quiet \
    --set train.epochs=100000 --set "train.max_steps=$((step + 10))" --resume "$ckpt"
  expect_rc 0
  expect_out "steps=$((step + 10)) .*status=ok"
}

preempt_once term TERM
preempt_once int INT

# Ctrl-C at a terminal signals the launcher's whole process group (set -m
# gave the job one): the launcher alone gets it, so it is a stop with a
# checkpoint too, with either launcher.
ctrl_c() {
  local name=$1
  start_job "$name" 4
  if ! wait_for_checkpoints 1 30; then
    out=$(cat "$job_out"); bad "$name: no checkpoint within 30 s"; return
  fi
  mark
  kill -INT -- "-$job"
  wait_job 20
  expect_rc 75
  expect_no_banner
  expect_within 10
  expect_out "vgpu_train: preempted at step [0-9]+ \(signal SIGUSR1\).*resumable: --resume "
  expect_nothing_left
}
ctrl_c ctrl-c-mpirun.sh
FAULT_LAUNCHER="$VGPU_BUILD_DIR/vgpurun" ctrl_c ctrl-c-vgpurun

# A stop right after the launch, before mpirun or the ranks are up (the
# issue's 138: mpirun.sh passed USR1 on before mpirun took it; vgpurun's was
# forwarded to no rank yet and lost, the job ran on): the launchers hold the
# request until every rank can take it, so it is a stop before the first
# step, exit 75, with either launcher and however early: from the moment the
# launcher runs its own code (it handles SIGTERM: /proc's SigCgt; before
# that, an interpreter or loader starting, the signal ends it as any process).
catches_term() {
  local line
  line=$(grep -m1 '^SigCgt:' "/proc/$1/status" 2>/dev/null) || return 1
  (( (16#${line##*[[:space:]]} >> 14) & 1 ))
}
for launcher in "$MPIRUN" "$VGPU_BUILD_DIR/vgpurun"; do
  for delay in 0 0.05 0.2 0.4; do
    FAULT_LAUNCHER=$launcher start_job "launch-$(basename "$launcher")-$delay" 4
    for _ in $(seq 1000); do catches_term "$job" && break; sleep 0.001; done
    sleep "$delay"
    mark
    kill -TERM "$job"
    wait_job 30
    expect_rc 75
    # (before the first step, or after some on a machine quick to start)
    expect_out "vgpu_train: (stopped before the first step|preempted at step [0-9]+) \(signal SIGUSR1\)"
    expect_nothing_left
  done
done

# A stop as the run ends (its summary printed, mpirun ending): the run is
# done, exit 0, with either launcher.
for launcher in "$MPIRUN" "$VGPU_BUILD_DIR/vgpurun"; do
  FAULT_LAUNCHER=$launcher start_job "at-end-$(basename "$launcher")" 4 --set train.max_steps=200
  for _ in $(seq 600); do grep -q 'status=ok' "$job_out" && break; sleep 0.05; done
  mark
  kill -INT "$job"
  wait_job 20
  expect_rc 0
  expect_out 'steps=200 .*status=ok$'
  expect_nothing_left
done

# Plain mpirun (no launcher of ours). It passes SIGUSR1 on: a stop, exit 75.
# A SIGINT or SIGTERM to mpirun itself it cannot pass on (Open MPI 4.1): it
# ends the job (SIGTERM to the ranks a second later, SIGKILL a second after)
# and exits 1 whatever the ranks do. The ranks take that SIGTERM as a stop,
# checkpoint, say where the stop came from and how to get 75, and write no
# flight records: it is no fault.
root_flag=
[ "$(id -u)" = 0 ] && root_flag=--allow-run-as-root
printf '#!/bin/sh\nexec mpirun %s --oversubscribe -q "$@"\n' "$root_flag" >"$WORK/plain-mpirun"
chmod +x "$WORK/plain-mpirun"
FAULT_LAUNCHER=$WORK/plain-mpirun start_job plain-usr1 4
if wait_for_checkpoints 1 30; then
  mark
  kill -USR1 "$job"
  wait_job 20
  expect_rc 75
  expect_out "vgpu_train: preempted at step [0-9]+ \(signal SIGUSR1\).*resumable: --resume "
  expect_no_out "the stop came from mpirun"
  expect_nothing_left
else
  out=$(cat "$job_out"); bad "plain-usr1: no checkpoint within 30 s"
fi
FAULT_LAUNCHER=$WORK/plain-mpirun start_job plain-int 4
if wait_for_checkpoints 1 30; then
  before=$(latest_checkpoint)
  mark
  kill -INT "$job"
  wait_job 20
  expect_rc 1 # Open MPI's own, documented (docs/TROUBLESHOOTING.md)
  expect_out "vgpu_train: preempted at step [0-9]+ \(signal SIGTERM\).*resumable: --resume "
  expect_out "^vgpu_train: the stop came from mpirun \(SIGTERM from pid $job\), which was signalled itself: it exits 1 whatever the ranks do .*for exit 75 send mpirun SIGUSR1, or launch with scripts/mpirun.sh or vgpurun$"
  expect_no_out "flight recorder"
  records=$(find "$VGPU_FLIGHT_DIR" -name '*.flight' 2>/dev/null | wc -l)
  if [ "$records" = 0 ]; then ok "no flight records for a stop"; else bad "$records flight records for a stop"; fi
  ckpt=$(sed -n 's/.*resumable: --resume \([^ ]*\).*/\1/p' <<<"$out" | tail -1)
  if [ -n "$ckpt" ] && [ -f "$ckpt" ] && [ "$ckpt" \> "$before" ]; then ok "new checkpoint $(basename "$ckpt")"
  else bad "no new checkpoint: '$ckpt' (before: $before)"; fi
  expect_nothing_left
else
  out=$(cat "$job_out"); bad "plain-int: no checkpoint within 30 s"
fi

# A stop during start-up, at each of its stages (widened by a test pause):
# every rank ends with exit 75 and nothing is left.
for stage in data open warmup; do
  VGPU_TEST_START_PAUSE=$stage:3 start_job "start-$stage" 4
  for _ in $(seq 100); do grep -q "test pause at $stage" "$job_out" && break; sleep 0.1; done
  mark
  kill -TERM "$job"
  wait_job 20
  expect_rc 75
  expect_within 6 # the 3 s pause, then the milestone
  expect_out "vgpu_train: stopped before the first step \(signal SIGUSR1\)"
  # From the device's opening on, the run has a summary line.
  [ "$stage" = data ] || expect_out 'status=preempted$'
  expect_nothing_left
done
# Without a launcher too (a singleton run: the signal reaches vgpu_train itself).
ckdir="$WORK/single"
VGPU_TEST_START_PAUSE=open:3 "$TRAIN" "$FAULT_CONFIG" --set "checkpoint.dir=$ckdir" >"$WORK/single.out" 2>&1 &
job=$!
for _ in $(seq 100); do grep -q "test pause at open" "$WORK/single.out" && break; sleep 0.1; done
mark
kill -TERM "$job"
job_out="$WORK/single.out"
wait_job 20
expect_rc 75
expect_out "vgpu_train: stopped before the first step \(signal SIGTERM\)"

# Two signals within a second are one request (a double Ctrl-C)...
start_job twice-quick 4
if wait_for_checkpoints 1 30; then
  mark
  kill -TERM "$job"
  kill -TERM "$job"
  wait_job 20
  expect_rc 75
  expect_out "vgpu_train: preempted at step"
  expect_nothing_left
else
  out=$(cat "$job_out"); bad "twice-quick: no checkpoint within 30 s"
fi
# ...and a second one later aborts. The ranks are held at start-up so that
# the first request is still pending when the second comes.
VGPU_TEST_START_PAUSE=open:5 start_job twice 4
for _ in $(seq 100); do grep -q "test pause at open" "$job_out" && break; sleep 0.1; done
mark
kill -TERM "$job"
sleep 1.5
kill -TERM "$job"
wait_job 20
expect_nonzero
expect_no_out 'stopped before the first step'
expect_within 5
expect_nothing_left
finish
