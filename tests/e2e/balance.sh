#!/usr/bin/env bash
# balance.sh: train.balance = dynamic. A rank made slower (test-only
# VGPU_INJECT_SLOW=RANK:FACTOR, standing in for a slower device) is given fewer
# rows of each batch; the gradient is still the global-batch mean (--verify);
# a skewed starting split moves back toward equal speeds; preemption still
# works through the combined exchange; deterministic mode refuses it.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/faults_lib.sh"
syn="$CONFIGS/synthetic_small.ini"
# 32 batches per epoch x 4 epochs: a dozen re-splits (one every 10 steps).
long=(--quiet --set train.epochs=4)

# split_of: the summary's split=a,b,... as words.
split_of() { sed -n 's/.* split=\([0-9,.]*\) .*/\1/p' <<<"$out" | tail -1 | tr ',' ' '; }

run "rank 1 four times slower, dynamic" 120 env VGPU_INJECT_SLOW=1:4 "$MPIRUN" -np 2 -x VGPU_INJECT_SLOW \
  "$TRAIN" "$syn" "${long[@]}" --set train.balance=dynamic
expect_rc 0
expect_out 'split=[0-9]+,[0-9]+ .*status=ok'
read -r a b <<<"$(split_of)"
if [ -n "$b" ] && [ "$a" -ge $((2 * b)) ]; then
  ok "the slow rank got fewer rows: mean split $a,$b of 64"
else
  bad "expected rank 0 to get at least twice rank 1's rows, split '$a,$b'"
fi

run "rank 1 four times slower, static" 120 env VGPU_INJECT_SLOW=1:4 "$MPIRUN" -np 2 -x VGPU_INJECT_SLOW \
  "$TRAIN" "$syn" "${long[@]}"
expect_rc 0
expect_no_out 'split='

run "4 ranks, rank 3 slowed" 120 env VGPU_INJECT_SLOW=3:4 "$MPIRUN" -np 4 -x VGPU_INJECT_SLOW \
  "$TRAIN" "$syn" "${long[@]}" --set train.balance=dynamic
expect_rc 0
read -r s0 s1 s2 s3 <<<"$(split_of)"
# Smallest, and below an equal share (16 of 64); 4 ranks on 2 cores may slow
# its core-mate as well (a tie).
if [ -n "$s3" ] && [ "$s3" -le "$s0" ] && [ "$s3" -le "$s1" ] && [ "$s3" -le "$s2" ] && [ "$s3" -lt 16 ]; then
  ok "rank 3 has the smallest share: $s0,$s1,$s2,$s3"
else
  bad "expected rank 3's share to be the smallest, split '$s0,$s1,$s2,$s3'"
fi

# A starting split of 0.9,0.1 on equal ranks: rows move to rank 1 (it would
# need to be 9x slower to deserve 0.1).
# Judged by the split in force at the end (progress lines): how fast it moves
# depends on how well the measured fixed cost per step explains a small
# share's time (under the sanitizers, and with a few rows per GEMM, less well).
run "skewed start, equal speeds" 120 "$MPIRUN" -np 2 "$TRAIN" "$syn" --set train.epochs=8 \
  --set train.log_every=10 --set train.balance=dynamic --set train.batch_weights=0.9,0.1
expect_rc 0
read -r a b <<<"$(sed -n 's/.* split \([0-9]*\),\([0-9]*\).*/\1 \2/p' <<<"$out" | tail -1)"
# Under ASan a step's fixed cost is several times larger and its two-point
# measurement noisier; read low, it makes the 6-row rank look slow and the
# split stays put (1 run in 4 alone, and in CI runs): there
# only the run's outcome is checked, the speeds are left to the plain build.
if grep -q '^VGPU_SANITIZE:BOOL=ON' "$VGPU_BUILD_DIR/CMakeCache.txt"; then
  echo "skip rank 1's share (sanitizer build: timings distorted); split in force '$a,$b'"
  expect_out 'status=ok'
elif [ -n "$b" ] && [ "$b" -ge 13 ]; then # 0.1 of 64 is 6.4
  ok "rank 1's share grew from 6 to $b of 64"
else
  bad "expected rank 1 to end with at least 13 of 64 rows, split in force '$a,$b'"
fi

# The re-split batches still give the global-batch mean: 60 steps (splits
# adopted at steps 20..50) replayed on one device; the slowed rank's mean
# share shows that rows did move.
run "--verify with a slowed rank" 120 env VGPU_INJECT_SLOW=2:3 "$MPIRUN" -np 3 -x VGPU_INJECT_SLOW \
  "$TRAIN" "$syn" --quiet --verify --set verify.steps=60 --set verify.rtol=1e-5 --set train.balance=dynamic
expect_rc 0
expect_out 'verify passed'
read -r s0 s1 s2 <<<"$(split_of)"
if [ -n "$s2" ] && [ "$s2" -lt "$s0" ] && [ "$s2" -lt "$s1" ]; then
  ok "rows moved off the slowed rank during the verified steps: $s0,$s1,$s2"
else
  bad "expected rank 2's mean share to be the smallest, split '$s0,$s1,$s2'"
fi

run "dynamic with deterministic" 60 "$MPIRUN" -np 2 "$TRAIN" "$syn" --quiet \
  --set train.balance=dynamic --set train.deterministic=true
expect_rc 2
expect_out 'train.balance = dynamic .*train.deterministic'

run "unknown balance mode" 60 "$MPIRUN" -np 2 "$TRAIN" "$syn" --quiet --set train.balance=sometimes
expect_rc 2
expect_out 'train.balance'

# The stop signal travels in the same exchange as the speeds.
start_job "preempt under dynamic balance" 2 --set train.balance=dynamic
if wait_for_checkpoints 1 30; then
  mark
  kill -TERM "$job"
  wait_job 20
  expect_rc 75
  expect_out 'vgpu_train: preempted at step [0-9]+ '
  expect_nothing_left
else
  out=$(cat "$job_out"); bad "no checkpoint within 30 s"
fi
finish
