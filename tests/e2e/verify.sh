#!/usr/bin/env bash
# verify.sh: vgpu_train --verify against the single-device replay; one step of
# N ranks equals one step of one process within 1e-5 (equal and weighted
# splits, N = 1..4), also with the ring all-reduce in several rounds; the
# replica check catches a planted divergence.
source "$(dirname "$0")/lib.sh"
syn="$CONFIGS/synthetic_small.ini"

for np in 1 2 3 4; do
  run "--verify np=$np" 120 "$MPIRUN" -np $np "$TRAIN" "$syn" --quiet --verify
  expect_rc 0
  expect_out 'vgpu_train: verify passed: max_rel_diff'
  expect_out "^  layer2.bias +10 "
done
run "--verify deterministic np=4" 120 "$MPIRUN" -np 4 "$TRAIN" "$syn" --quiet --verify --set train.deterministic=true
expect_rc 0
expect_out 'verify passed: bitwise identical'

# One step, equal and weighted splits, relative 1e-5 (per tensor, scaled by
# the tensor's largest value).
weights=("" "1" "0.7,0.3" "0.5,0.3,0.2" "0.1,0.2,0.3,0.4")
for np in 1 2 3 4; do
  for w in "" "${weights[$np]}"; do
    args=(--set verify.steps=1 --set verify.rtol=1e-5)
    [ -n "$w" ] && args+=(--set "train.batch_weights=$w")
    run "one step np=$np weights='${w:-equal}'" 120 "$MPIRUN" -np $np "$TRAIN" "$syn" --quiet --verify "${args[@]}"
    expect_rc 0
    expect_out 'verify passed'
  done
done
# The same on Fashion-MNIST's model shape (784-256-128-10) when it is installed.
if [ -d /usr/share/datasets/fashion-mnist ]; then
  run "one step fashion-mnist np=4 weighted" 120 "$MPIRUN" -np 4 "$TRAIN" "$CONFIGS/default.ini" --quiet --verify \
    --set verify.steps=1 --set verify.rtol=1e-5 --set data.train_limit=4096 --set train.batch_weights=0.4,0.3,0.2,0.1
  expect_rc 0
  expect_out 'verify passed'
fi

# A planted divergence (test-only switch): rank 2's parameters change after
# step 13; with every rank updating every parameter (shard_optimizer off),
# the check at step 20 names it.
run "planted divergence" 120 env VGPU_INJECT_PERTURB=2@13 "$MPIRUN" -np 4 -x VGPU_INJECT_PERTURB "$TRAIN" "$syn" --quiet --set train.check_replicas_every=10 --set train.shard_optimizer=false
expect_rc 3
expect_no_banner
expect_out 'replica check at step 20: rank 2 diverged from rank 0'
expect_out 'rank 2: first difference in layer[0-9]\.(weight|bias)\['
expect_out 'status=diverged'
expect_no_shm
# With the sharded optimizer (default) every step re-gathers the parameters
# from the rank that updated them, so a stray change lives until the next
# step: the check catches it at the step it happens.
run "planted divergence, sharded optimizer" 120 env VGPU_INJECT_PERTURB=2@20 "$MPIRUN" -np 4 -x VGPU_INJECT_PERTURB "$TRAIN" "$syn" --quiet --set train.check_replicas_every=10
expect_rc 3
expect_out 'replica check at step 20: rank 2 diverged from rank 0'
expect_out 'status=diverged'
# --verify with and without the sharded optimizer.
for shard in true false; do
  run "--verify np=4 shard_optimizer=$shard" 120 "$MPIRUN" -np 4 "$TRAIN" "$syn" --quiet --verify --set train.shard_optimizer=$shard --set verify.rtol=1e-5
  expect_rc 0
  expect_out 'verify passed'
done
# The ring all-reduce in several rounds. Every other training run of the
# e2e tests moves its gradients in one round (6570 parameters, 26 KB; a
# round is ranks x comm.slice_bytes, 1 MiB by default), so a round skipped
# or cut short where there are several passes them all; and the replica
# check cannot see it where every rank skips alike (the sharded optimizer
# then leaves the same parameters un-updated everywhere). With 4 KiB slices
# 3 ranks take 3 rounds (3072 floats each, the last one 426). The sharded
# optimizer's all-reduce is the ring always; the plain one (shard_optimizer
# off) would go one-shot or direct at this size: VGPU_RING_ALGO=ring puts it
# on the ring too.
for shard in true false; do
  run "--verify np=3 ring in 3 rounds, shard_optimizer=$shard" 60 env VGPU_RING_ALGO=ring \
    "$MPIRUN" -np 3 -x VGPU_RING_ALGO "$TRAIN" "$syn" --quiet --verify --set comm.slice_bytes=4K \
    --set train.shard_optimizer=$shard --set verify.rtol=1e-5
  expect_rc 0
  expect_out 'verify passed'
done

# --verify fails when the run is wrong (one rank, perturbed: no replica to disagree).
run "--verify catches a wrong run" 120 env VGPU_INJECT_PERTURB=0@5 "$MPIRUN" -np 1 -x VGPU_INJECT_PERTURB "$TRAIN" "$syn" --quiet --verify --set train.deterministic=true
expect_rc 3
expect_out 'verify FAILED'
expect_out 'status=verify_failed'

run "--verify with --resume" 30 "$MPIRUN" -np 1 "$TRAIN" "$syn" --verify --resume x.bin
expect_rc 2
expect_out 'cannot --resume'
finish
