#!/usr/bin/env bash
# devcoll_train.sh: vgpu_train on the device collectives (issue 43), the
# protocol a GPU's kernel runs, here on the simulated device (VGPU_DEVCOLL=1
# on CPU devices): the job table says so; with 2 ranks the parameters are
# bitwise those of the ring's host paths (a + b is b + a, and the update is
# the same, also with buckets all-reduced while the backward pass goes on);
# with 4 ranks (the all-reduce in position order, in rounds) the
# job trains to the same accuracy band.
source "$(dirname "$0")/lib.sh"
cfg="$CONFIGS/default.ini"
crc() { grep -o 'params_crc=[0-9a-f]*' <<<"$out"; }

run "2 ranks, host paths" 120 env VGPU_DEVCOLL=0 "$MPIRUN" -np 2 "$TRAIN" "$cfg" --set train.epochs=1
expect_rc 0
expect_no_out 'the collectives stay on it'
host_crc=$(crc)
run "2 ranks, device collectives" 120 env VGPU_DEVCOLL=1 "$MPIRUN" -np 2 "$TRAIN" "$cfg" \
  --set train.epochs=1
expect_rc 0
# (the job table wraps its lines: joined first)
if tr -s ' \n' '  ' <<<"$out" | grep -q 'every rank shares one device: the collectives stay on it, one kernel a call (VGPU_DEVCOLL))'; then
  ok "the job table says the collectives stay on the device"
else
  bad "the job table does not say the collectives stay on the device"
fi
if [ -n "$host_crc" ] && [ "$(crc)" = "$host_crc" ]; then
  ok "the same parameters as the host paths ($host_crc)"
else
  bad "parameters $(crc), the host paths' $host_crc"
fi

# Buckets all-reduced from the trainer's second thread while the backward
# pass goes on (train.bucket_mb): the same parameters again.
run "2 ranks, device collectives, buckets" 120 env VGPU_DEVCOLL=1 "$MPIRUN" -np 2 "$TRAIN" "$cfg" \
  --set train.epochs=1 --set train.bucket_mb=0.25
expect_rc 0
if [ -n "$host_crc" ] && [ "$(crc)" = "$host_crc" ]; then
  ok "buckets: the same parameters ($host_crc)"
else
  bad "buckets: parameters $(crc), the host paths' $host_crc"
fi

run "4 ranks, device collectives, both all-reduces" 180 env VGPU_DEVCOLL=1 VGPU_DEVCOLL_AREA_KB=64 \
  "$MPIRUN" -np 4 "$TRAIN" "$cfg" --set train.epochs=1
expect_rc 0
expect_out 'status=ok'
expect_out 'test_acc=0\.(8[2-9]|9)'
expect_no_shm
finish
