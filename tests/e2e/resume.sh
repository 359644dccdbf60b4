#!/usr/bin/env bash
# resume.sh: a run interrupted at a checkpoint and resumed continues the same
# run: bitwise with the same rank count, within float reassociation with
# another, also from an epoch's last step (its evaluation follows) and from a
# finished run (evaluated, nothing trained); damaged or mismatched checkpoints
# (another model, another seed) and bad paths are refused with exit 2.
source "$(dirname "$0")/lib.sh"
cfg="$CONFIGS/synthetic_small.ini"
field() { grep -oE "$1=[^ ]+" <<<"$2" | tail -1 | cut -d= -f2; }

# 32 steps an epoch: checkpoints at the end of epoch 1 and of the run.
run "uninterrupted" 60 "$MPIRUN" -np 4 "$TRAIN" "$cfg" --quiet --set "checkpoint.dir=$WORK/ck32" --set checkpoint.every_steps=32 --metrics "$WORK/full.csv"
expect_rc 0
full=$(tail -1 <<<"$out")

run "first 40 steps, checkpoint" 60 "$MPIRUN" -np 4 "$TRAIN" "$cfg" --quiet --set train.max_steps=40 --set "checkpoint.dir=$WORK/ck" --metrics "$WORK/split.csv"
expect_rc 0
ckpt="$WORK/ck/ckpt-0000000040.bin"
if [ -f "$ckpt" ] && ! ls "$WORK/ck" | grep -q tmp; then ok "checkpoint written, no temp file"; else bad "checkpoint missing: $(ls "$WORK/ck")"; fi

first_part=$(cat "$WORK/split.csv")
run "resume with 4 ranks" 60 "$MPIRUN" -np 4 "$TRAIN" "$cfg" --quiet --resume "$ckpt" --metrics "$WORK/split.csv"
expect_rc 0
if [ "$(field params_crc "$out")" = "$(field params_crc "$full")" ]; then ok "same params_crc as uninterrupted"; else bad "params_crc $(field params_crc "$out") != $(field params_crc "$full")"; fi
# The same --metrics file: the first part's rows are kept, a resume row marks
# the seam, and the two parts together are the uninterrupted run's rows (all
# but throughput and elapsed time), besides the evaluation the first part
# made when it stopped at step 40 (train.max_steps).
if [ "$(head -n "$(wc -l <<<"$first_part")" "$WORK/split.csv")" = "$first_part" ]; then
  ok "resuming kept the first part's $(($(wc -l <<<"$first_part") - 1)) metrics rows"
else bad "the first part's metrics rows changed: $(head -5 "$WORK/split.csv")"; fi
expect_seam=$(grep -c '^resume,2,40,' "$WORK/split.csv")
if [ "$expect_seam" = 1 ]; then ok "one resume row at step 40"; else bad "resume rows: $(grep '^resume' "$WORK/split.csv")"; fi
joined=$(grep -vE '^(resume|eval,[0-9]+,40,)' "$WORK/split.csv" | cut -d, -f1-7)
if [ "$joined" = "$(cut -d, -f1-7 "$WORK/full.csv")" ]; then
  ok "both parts' rows are the uninterrupted run's"
else bad "rows differ: $(diff <(echo "$joined") <(cut -d, -f1-7 "$WORK/full.csv") | head -5)"; fi
echo "step,loss" >"$WORK/other.csv"
run "resume into a file that is not a metrics CSV" 60 "$MPIRUN" -np 2 "$TRAIN" "$cfg" --quiet --resume "$ckpt" --metrics "$WORK/other.csv"
expect_rc 2
expect_out "metrics .*other.csv: the file exists and is not a vgpu_train metrics CSV"
if [ "$(cat "$WORK/other.csv")" = "step,loss" ]; then ok "the other file is untouched"; else bad "other.csv changed"; fi
printf 'kind,epoch,step,lr,loss,accuracy,top5,samples_per_s,elapsed_s\ntrain,1,20,0.003,2.1,0.2,,100.0,0.1\n' >"$WORK/v1.csv"
run "resume into an older metrics CSV" 60 "$MPIRUN" -np 2 "$TRAIN" "$cfg" --quiet --resume "$ckpt" --metrics "$WORK/v1.csv"
expect_rc 2
expect_out "metrics .*v1.csv was written by an older vgpu_train \(no step-time columns\); give the resumed run a new file"

expect_no_out 'schedule is rescaled' # a constant rate does not depend on the horizon

# A horizon that moved (max_steps 40 -> the whole 64) moves a cosine
# schedule's rate: said, with both rates.
run "cosine, 40 of 64 steps" 60 "$MPIRUN" -np 2 "$TRAIN" "$cfg" --quiet --set train.schedule=cosine \
  --set train.max_steps=40 --set "checkpoint.dir=$WORK/cos"
expect_rc 0
run "resume it for all 64" 60 "$MPIRUN" -np 2 "$TRAIN" "$cfg" --quiet --set train.schedule=cosine \
  --resume "$WORK/cos/ckpt-0000000040.bin"
expect_rc 0
expect_out "warning: the checkpoint's run was to take 40 steps, this one takes 64: the cosine learning-rate schedule is rescaled, so the rate at step 41 is [0-9.e-]+, not [0-9.e-]+"

run "resume with 2 ranks" 60 "$MPIRUN" -np 2 "$TRAIN" "$cfg" --quiet --resume "$ckpt"
expect_rc 0
a=$(field test_loss "$out"); b=$(field test_loss "$full")
if [ "$(echo "d = $a - $b; if (d < 0) d = -d; d < 0.002" | bc -l)" = 1 ]; then ok "test_loss $a ~ $b"; else bad "test_loss $a vs $b"; fi

run "resume from an epoch's last step" 60 "$MPIRUN" -np 4 "$TRAIN" "$cfg" --quiet --resume "$WORK/ck32/ckpt-0000000032.bin" --metrics "$WORK/boundary.csv"
expect_rc 0
if [ "$(field params_crc "$out")" = "$(field params_crc "$full")" ]; then ok "same params_crc as uninterrupted"; else bad "params_crc $(field params_crc "$out") != $(field params_crc "$full")"; fi
# The checkpoint precedes epoch 1's evaluation: the resumed run does it, with
# the uninterrupted run's figures and learning rate (all but elapsed_s).
want=$(grep '^eval,1,' "$WORK/full.csv" | cut -d, -f1-7); got=$(grep '^eval,1,' "$WORK/boundary.csv" | cut -d, -f1-7)
if [ -n "$want" ] && [ "$got" = "$want" ]; then ok "epoch 1 evaluated once, as uninterrupted: $got"; else bad "eval row '$got', uninterrupted '$want'"; fi

run "resume a finished run" 60 "$MPIRUN" -np 2 "$TRAIN" "$cfg" --resume "$WORK/ck32/ckpt-0000000064.bin"
expect_rc 0
expect_out 'nothing left to train at step 64'
if [ "$(field test_acc "$out")" = "$(field test_acc "$full")" ] && [ "$(field epochs "$out")" = 2 ]; then
  ok "evaluates what it restored: test_acc $(field test_acc "$out"), epochs 2"
else bad "summary: $(tail -1 <<<"$out")"; fi

run "resume with another train.seed" 60 "$MPIRUN" -np 2 "$TRAIN" "$cfg" --quiet --resume "$ckpt" --set train.seed=99
expect_rc 2
expect_out 'cannot resume: .*train.seed'

cp "$ckpt" "$WORK/bad.bin"
printf '\xff' | dd of="$WORK/bad.bin" bs=1 seek=300 conv=notrunc status=none
run "corrupted checkpoint" 60 "$MPIRUN" -np 2 "$TRAIN" "$cfg" --quiet --resume "$WORK/bad.bin"
expect_rc 2
expect_out 'cannot resume: .*bad.bin.*CRC'

run "checkpoint of another model" 60 "$MPIRUN" -np 2 "$TRAIN" "$cfg" --quiet --resume "$ckpt" --set model.hidden=32
expect_rc 2
expect_out 'cannot resume: .*64-64-32-10'

run "checkpoint path that does not exist" 60 "$MPIRUN" -np 2 "$TRAIN" "$cfg" --quiet --resume "$WORK/none.bin"
expect_rc 2
expect_out 'cannot resume: .*none.bin: cannot open: No such file'

head -c 100 "$ckpt" >"$WORK/short.bin"
run "truncated checkpoint" 60 "$MPIRUN" -np 2 "$TRAIN" "$cfg" --quiet --resume "$WORK/short.bin"
expect_rc 2
expect_out 'cannot resume: .*short.bin'
expect_no_shm
finish
