#!/usr/bin/env bash
# resume.sh: a run interrupted at a checkpoint and resumed continues the same
# run: bitwise with the same rank count, within float reassociation with
# another; damaged or mismatched checkpoints are refused with exit 2.
source "$(dirname "$0")/lib.sh"
cfg="$CONFIGS/synthetic_small.ini"
field() { grep -oE "$1=[^ ]+" <<<"$2" | tail -1 | cut -d= -f2; }

run "uninterrupted" 60 "$MPIRUN" -np 4 "$TRAIN" "$cfg" --quiet
expect_rc 0
full=$(tail -1 <<<"$out")

run "first 40 steps, checkpoint" 60 "$MPIRUN" -np 4 "$TRAIN" "$cfg" --quiet --set train.max_steps=40 --set "checkpoint.dir=$WORK/ck"
expect_rc 0
ckpt="$WORK/ck/ckpt-0000000040.bin"
if [ -f "$ckpt" ] && ! ls "$WORK/ck" | grep -q tmp; then ok "checkpoint written, no temp file"; else bad "checkpoint missing: $(ls "$WORK/ck")"; fi

run "resume with 4 ranks" 60 "$MPIRUN" -np 4 "$TRAIN" "$cfg" --quiet --resume "$ckpt"
expect_rc 0
if [ "$(field params_crc "$out")" = "$(field params_crc "$full")" ]; then ok "same params_crc as uninterrupted"; else bad "params_crc $(field params_crc "$out") != $(field params_crc "$full")"; fi

run "resume with 2 ranks" 60 "$MPIRUN" -np 2 "$TRAIN" "$cfg" --quiet --resume "$ckpt"
expect_rc 0
a=$(field test_loss "$out"); b=$(field test_loss "$full")
if [ "$(echo "d = $a - $b; if (d < 0) d = -d; d < 0.002" | bc -l)" = 1 ]; then ok "test_loss $a ~ $b"; else bad "test_loss $a vs $b"; fi

cp "$ckpt" "$WORK/bad.bin"
printf '\xff' | dd of="$WORK/bad.bin" bs=1 seek=300 conv=notrunc status=none
run "corrupted checkpoint" 60 "$MPIRUN" -np 2 "$TRAIN" "$cfg" --quiet --resume "$WORK/bad.bin"
expect_rc 2
expect_out 'cannot resume: .*bad.bin.*CRC'

run "checkpoint of another model" 60 "$MPIRUN" -np 2 "$TRAIN" "$cfg" --quiet --resume "$ckpt" --set model.hidden=32
expect_rc 2
expect_out 'cannot resume: .*64-64-32-10'

head -c 100 "$ckpt" >"$WORK/short.bin"
run "truncated checkpoint" 60 "$MPIRUN" -np 2 "$TRAIN" "$cfg" --quiet --resume "$WORK/short.bin"
expect_rc 2
expect_out 'cannot resume: .*short.bin'
expect_no_shm
finish
