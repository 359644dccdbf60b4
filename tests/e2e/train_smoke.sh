#!/usr/bin/env bash
# train_smoke.sh: 4 ranks train the synthetic config end to end.
source "$(dirname "$0")/lib.sh"

run "4 ranks, synthetic_small" 120 "$MPIRUN" -np 4 "$TRAIN" "$CONFIGS/synthetic_small.ini" --metrics "$WORK/m.csv"
# What limits a step, said when collectives take most of it: here, ranks
# outnumbering the cores they share (said only where they do).
if [ "$(nproc)" -lt 4 ]; then
  expect_out "^vgpu_train: mostly waiting: 4 ranks share the $(nproc) cores of rank [0-3]'s machine\$"
else
  expect_no_out 'ranks share the [0-9]+ cores'
fi
expect_rc 0
expect_out 'vgpu: no GPU: 4 CPU-simulated virtual GPUs \(4 ranks, 1 host; BLAS: [0-9]+ threads?\)'
for r in 0 1 2 3; do expect_out "^ +$r +[^ ]+ +$r +cpu0 "; done
expect_out 'collectives: ring'
# Progress lines: loss, accuracy, samples/s and every rank's peak device memory.
expect_out '^epoch +1  step +20/64 +loss [0-9.]+  acc [0-9.]+  lr [0-9.e-]+ +[0-9]+ samples/s  mem [0-9.]+M,[0-9.]+M,[0-9.]+M,[0-9.]+M$'
last=$(tail -n 1 <<<"$out")
if grep -qE '^vgpu_train: done ranks=4 .*devices=1xcpu/4vgpu .*peak_mem=[0-9.]+M,[0-9.]+M,[0-9.]+M,[0-9.]+M .*status=ok$' <<<"$last"; then
  ok "last line is the summary"
else
  bad "last line is not the summary: $last"
fi
acc=$(grep -oE 'test_acc=[0-9.]+' <<<"$last" | cut -d= -f2)
if [ -n "$acc" ] && [ "$(echo "$acc > 0.9" | bc)" = 1 ]; then ok "learns (test_acc=$acc)"; else bad "test_acc=$acc, expected > 0.9"; fi
if head -1 "$WORK/m.csv" | grep -q '^kind,epoch,step,lr,loss,accuracy,top5,samples_per_s,elapsed_s,compute_ms,wait_ms,move_ms,optim_ms$' &&
   grep -q '^eval,2,' "$WORK/m.csv"; then ok "metrics CSV"; else bad "metrics CSV: $(head -3 "$WORK/m.csv")"; fi
expect_no_shm

# More than 8 ranks: the progress line names the largest peak and its rank.
run "9 ranks" 120 "$MPIRUN" -np 9 "$TRAIN" "$CONFIGS/synthetic_small.ini" --set train.batch_size=72 \
  --set train.epochs=1 --set train.balance=dynamic
expect_rc 0
expect_out '^epoch +1  step +20/28 .* samples/s  mem max [0-9.]+M \(rank [0-8]\)  split [0-9]+\.\.[0-9]+$'

# Past 16 ranks the job table summarises; the summary line keeps one token
# per field (peak_mem lo..hi); a run cut inside an epoch counts its share.
run "20 ranks, 10 steps" 120 "$MPIRUN" -np 20 "$TRAIN" "$CONFIGS/synthetic_small.ini" --set train.batch_size=80 \
  --set train.epochs=1 --set train.max_steps=10
expect_rc 0
expect_out '^ +\.\.\. 5 more ranks \(vgpu14\.\.vgpu18\)$'
expect_out '^ +19 +[^ ]+ +19 +cpu0 .* vgpu19 '
expect_out '^eval  epoch   1 '
expect_out '^vgpu_train: done ranks=20 .* epochs=0\.40 steps=10 .* peak_mem=[0-9.]+M\.\.[0-9.]+M params_crc=[0-9a-f]+ status=ok$'

# What runs but is likely not meant is said at start; settings from the
# environment are named; the summary names the data.
run "warnings and the environment" 60 env VGPU_MEMORY_LIMIT=48M "$MPIRUN" -x VGPU_MEMORY_LIMIT -np 4 \
  "$TRAIN" "$CONFIGS/synthetic_small.ini" --set train.batch_size=2 --set train.max_steps=3 \
  --set checkpoint.every_steps=5 --set checkpoint.dir=
expect_rc 0
expect_out '^vgpu: from the environment: VGPU_MEMORY_LIMIT=48M \(devices\.memory_limit\)$'
expect_out 'warning: 2 of 4 ranks get no rows of a batch of 2 \(train\.batch_size\)'
expect_out 'warning: checkpoint\.every_steps = 5 writes nothing: checkpoint\.dir is empty'
expect_out '^vgpu_train: done .* data=synthetic .*status=ok$'

# The live bar at 80 columns: every frame on one line (cut to 79 characters,
# cleared to the end), and the eval line on a line of its own.
run "progress bar, 80 columns" 60 env VGPU_PROGRESS=bar COLUMNS=80 "$MPIRUN" -x VGPU_PROGRESS -x COLUMNS \
  -np 2 "$TRAIN" "$CONFIGS/synthetic_small.ini" --set train.log_every=8
expect_rc 0
frames=$(tr '\r' '\n' <<<"$out" | grep -a '^\[[#.]*\] ')
longest=$(sed 's/\x1b\[K$//' <<<"$frames" | awk '{ if (length > m) m = length } END { print m + 0 }')
if [ "$(wc -l <<<"$frames")" -eq 8 ] && [ "$longest" -le 79 ] && ! grep -qv $'\x1b\\[K$' <<<"$frames"; then
  ok "8 bar frames, at most 79 characters, each cleared to the end of the line"
else
  bad "bar frames: $(wc -l <<<"$frames"), longest $longest characters"
fi
expect_out '^eval  epoch   2 '
# At 80 columns the fields that fit, whole: the rate, lr and memory come on
# a wider terminal.
if grep -qE '^\[#+\] 100% epoch 2/2 step 64/64 loss [0-9.]+ acc [0-9.]+ [0-9:]+<0:00'$'\x1b''\[K$' <<<"$frames"; then
  ok "the last frame: 100%, epoch 2/2, step 64/64, nothing left, whole fields"
else
  bad "no final frame in: $(tail -1 <<<"$frames")"
fi
run "progress bar, 160 columns" 60 env VGPU_PROGRESS=bar COLUMNS=160 "$MPIRUN" -x VGPU_PROGRESS -x COLUMNS \
  -np 2 "$TRAIN" "$CONFIGS/synthetic_small.ini" --set train.log_every=8
frames=$(tr '\r' '\n' <<<"$out" | grep -a '^\[[#.]*\] ')
if grep -qE '^\[#+\] 100% .*<0:00 +[0-9]+ samples/s lr [0-9.e+-]+ mem [0-9.]+M,[0-9.]+M'$'\x1b''\[K$' <<<"$frames"; then
  ok "at 160 columns every field: the rate, lr, memory"
else
  bad "the last wide frame: $(tail -1 <<<"$frames")"
fi

# A launcher that says the job's output is a terminal (VGPU_TERMINAL=1, as
# vgpurun and scripts/mpirun.sh do on one) gets the bar; VGPU_PROGRESS=lines
# still wins.
run "VGPU_TERMINAL=1" 60 env -u VGPU_PROGRESS VGPU_TERMINAL=1 COLUMNS=80 "$MPIRUN" \
  -x VGPU_TERMINAL -x COLUMNS -np 2 "$TRAIN" "$CONFIGS/synthetic_small.ini" --set train.log_every=8
expect_rc 0
if [ "$(tr '\r' '\n' <<<"$out" | grep -ac '^\[[#.]*\] ')" -eq 8 ]; then
  ok "8 bar frames"
else
  bad "no bar: $(tr '\r' '\n' <<<"$out" | grep -ac '^\[[#.]*\] ') frames"
fi
run "VGPU_TERMINAL=1, VGPU_PROGRESS=lines" 60 env VGPU_PROGRESS=lines VGPU_TERMINAL=1 "$MPIRUN" \
  -x VGPU_TERMINAL -x VGPU_PROGRESS -np 2 "$TRAIN" "$CONFIGS/synthetic_small.ini" --set train.log_every=8
expect_rc 0
expect_no_out '^\[[#.]*\] '
expect_out '^epoch +2 +step +64/64 '

# The cap a user sets is the cap every rank's virtual GPU gets (the job
# table's last column), and the run still completes within it.
run "--set devices.memory_limit=64M" 120 "$MPIRUN" -np 4 "$TRAIN" "$CONFIGS/synthetic_small.ini" \
  --set devices.memory_limit=64M --set train.epochs=1
expect_rc 0
for r in 0 1 2 3; do expect_out "^ +$r +[^ ]+ +$r +cpu0 .* vgpu$r +64\.0 MiB$"; done
expect_out 'status=ok$'

# Metrics that cannot be written are not lost in silence: a message naming
# the file, status=metrics_lost and exit 1; at once when even the header
# fails (/dev/full), after training when the disk fills half-way.
run "--metrics /dev/full" 60 "$MPIRUN" -np 2 "$TRAIN" "$CONFIGS/synthetic_small.ini" --metrics /dev/full
expect_rc 1
expect_out 'metrics: writing /dev/full failed at step 0: No space left on device'
expect_out 'status=metrics_lost$'
if [ "$(id -u)" = 0 ] && mkdir "$WORK/full" && mount -t tmpfs -o size=4k tmpfs "$WORK/full" 2>/dev/null; then
  run "--metrics on a disk that fills" 60 "$MPIRUN" -np 2 "$TRAIN" "$CONFIGS/synthetic_small.ini" \
    --set train.log_every=1 --set train.epochs=100 --set train.max_steps=300 --metrics "$WORK/full/m.csv"
  umount "$WORK/full"
  expect_rc 1
  expect_out "metrics: writing $WORK/full/m.csv failed at step [0-9]+: No space left on device"
  expect_out '^vgpu_train: done .* steps=300 .*status=metrics_lost$'
else
  echo "--- a disk that fills mid-run: not checked (needs root to mount a 4 KiB tmpfs)"
fi
finish
