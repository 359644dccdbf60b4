#!/usr/bin/env bash
# full_fashion_mnist.sh (label slow): the README's main job, configs/default.ini
# with 4 ranks on real Fashion-MNIST: test accuracy >= 0.89 within 15 epochs,
# in under 3 minutes of wall time.
source "$(dirname "$0")/lib.sh"
if [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] &&
   [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte ]; then
  skip "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)"
fi
run "default.ini, 4 ranks" 300 "$MPIRUN" -np 4 "$TRAIN" "$CONFIGS/default.ini" --set data.fallback_synthetic=false
expect_rc 0
expect_out 'vgpu_train: data: fashion-mnist from /usr/share/datasets/fashion-mnist'
last=$(tail -n 1 <<<"$out")
echo "$last"
epochs=$(grep -oE 'epochs=[0-9]+' <<<"$last" | cut -d= -f2)
acc=$(grep -oE 'test_acc=[0-9.]+' <<<"$last" | cut -d= -f2)
if [ -n "$epochs" ] && [ "$epochs" -le 15 ]; then ok "epochs=$epochs <= 15"; else bad "epochs=$epochs"; fi
if [ -n "$acc" ] && [ "$(echo "$acc >= 0.89" | bc)" = 1 ]; then ok "test_acc=$acc >= 0.89"; else bad "test_acc=$acc, target 0.89"; fi
expect_within 180
expect_no_shm
finish
