#!/usr/bin/env bash
# preempt.sh: SIGTERM or SIGINT to the launcher (what Slurm or a user sends
# before killing a job): the ranks stop within 10 steps, write a
# checkpoint and the launcher exits 75 ("preempted, resumable") naming it; the
# checkpoint resumes and nothing is left behind. Two signals in a row abort:
# non-zero at once, nothing left, no finished checkpoint damaged.
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

start_job twice 4
if wait_for_checkpoints 1 30; then
  mark
  kill -TERM "$job"
  kill -TERM "$job"
  wait_job 20
  expect_nonzero
  expect_within 3
  expect_nothing_left
  expect_checkpoints_intact
else
  out=$(cat "$job_out"); bad "twice: no checkpoint within 30 s"
fi
finish
