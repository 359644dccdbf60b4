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
