#!/usr/bin/env bash
# init_file.sh: model.init_file and train.shuffle = false end to end. A run
# starts from the file's parameters (with lr 0 its params_crc is the file's
# CRC-32) and --verify's replay starts from them too; a file that cannot be
# read, of another size, or holding NaN or inf ends the job with exit 2 and
# one line naming the file. train.shuffle = false trains on another order
# than the default, --verify's replay follows it, and a run interrupted
# mid-epoch and resumed continues it bitwise. (tests/test_gpt_curve.sh proves
# both against PyTorch: the same parameters and batches in file order give
# the same training curve.)
source "$(dirname "$0")/lib.sh"
cfg="$CONFIGS/synthetic_small.ini"
field() { grep -oE "$1=[^ ]+" <<<"$2" | tail -1 | cut -d= -f2; }
# The CRC-32 that params_crc is (zlib's), from gzip's trailer, as 8 hex digits.
crc32_of() { gzip -c "$1" | tail -c 8 | od -An -tx4 -N4 | tr -d ' \n'; }

# A file of one float tells the model's size in its refusal.
printf '\0\0\0\0' >"$WORK/one.bin"
run "init_file of one float" 30 "$MPIRUN" -np 2 "$TRAIN" "$cfg" --quiet --set "model.init_file=$WORK/one.bin"
expect_rc 2
expect_out "^\[rank 0@[^]]+\] error: model.init_file $WORK/one.bin: 4 bytes, but the model's [0-9]+ parameters take [0-9]+ \(float32 each"
if [ "$(grep -c . <<<"$out")" = 1 ]; then ok "one line"; else bad "$(grep -c . <<<"$out") lines"; fi
n=$(grep -oE "the model's [0-9]+ parameters" <<<"$out" | grep -oE '[0-9]+')
[ -n "$n" ] || { bad "no parameter count in the refusal"; finish; }

head -c $((4 * n)) /dev/zero >"$WORK/zeros.bin"
run "init_file of zeros, lr 0" 60 "$MPIRUN" -np 2 "$TRAIN" "$cfg" --quiet --set "model.init_file=$WORK/zeros.bin" \
  --set train.lr=0 --set train.max_steps=3
expect_rc 0
want=$(crc32_of "$WORK/zeros.bin")
if [ "$(field params_crc "$out")" = "$want" ]; then ok "params_crc $want: the file's parameters, untouched"
else bad "params_crc $(field params_crc "$out"), the file's CRC-32 is $want"; fi
run "init_file under --verify" 60 "$MPIRUN" -np 2 "$TRAIN" "$cfg" --quiet --verify --set "model.init_file=$WORK/zeros.bin"
expect_rc 0
expect_out 'vgpu_train: verify passed'

# nan_at FILE INDEX BYTES: FILE with float INDEX overwritten by 4 bytes (octal escapes).
nan_at() { cp "$WORK/zeros.bin" "$1"; printf "$3" | dd of="$1" bs=4 seek="$2" conv=notrunc status=none; }
nan_at "$WORK/nan.bin" 7 '\0\0\300\177'   # 0x7fc00000: a quiet NaN
nan_at "$WORK/inf.bin" $((n - 1)) '\0\0\200\377' # 0xff800000: -inf
head -c $((4 * n + 4)) /dev/zero >"$WORK/long.bin"
declare -A why=(
  [nan.bin]="1 of $n parameters are NaN or infinite \(the first at index 7\)"
  [inf.bin]="1 of $n parameters are NaN or infinite \(the first at index $((n - 1))\)"
  [long.bin]="$((4 * n + 4)) bytes, but the model's $n parameters take $((4 * n)) \(float32 each, little-endian, in the model's flat layout\)"
  [missing.bin]="cannot open: No such file or directory"
  [.]="not a regular file"
)
for f in nan.bin inf.bin long.bin missing.bin .; do
  run "init_file $f" 30 "$MPIRUN" -np 2 "$TRAIN" "$cfg" --quiet --set "model.init_file=$WORK/$f"
  expect_rc 2
  expect_out "^\[rank 0@[^]]+\] error: model.init_file $WORK/$f: ${why[$f]}\$"
  if [ "$(grep -c . <<<"$out")" = 1 ]; then ok "one line"; else bad "$(grep -c . <<<"$out") lines"; fi
  expect_no_out '^epoch'
done

# train.shuffle = false: another order than the seeded one; resumed at step
# 40 (mid-epoch 2 of 32-step epochs) it ends where the uninterrupted run does.
run "default order" 60 "$MPIRUN" -np 2 "$TRAIN" "$cfg" --quiet
expect_rc 0
shuffled=$(field params_crc "$out")
run "file order" 60 "$MPIRUN" -np 2 "$TRAIN" "$cfg" --quiet --set train.shuffle=false
expect_rc 0
ordered=$(field params_crc "$out")
if [ -n "$ordered" ] && [ "$ordered" != "$shuffled" ]; then ok "file order trains to $ordered, the shuffle to $shuffled"
else bad "params_crc $ordered in file order, $shuffled shuffled"; fi
run "file order, first 40 steps" 60 "$MPIRUN" -np 2 "$TRAIN" "$cfg" --quiet --set train.shuffle=false \
  --set train.max_steps=40 --set "checkpoint.dir=$WORK/ck"
expect_rc 0
run "file order, resumed" 60 "$MPIRUN" -np 2 "$TRAIN" "$cfg" --quiet --set train.shuffle=false \
  --resume "$WORK/ck/ckpt-0000000040.bin"
expect_rc 0
if [ "$(field params_crc "$out")" = "$ordered" ]; then ok "resumed: params_crc $ordered, as uninterrupted"
else bad "resumed: params_crc $(field params_crc "$out"), uninterrupted $ordered"; fi
run "file order under --verify" 60 "$MPIRUN" -np 2 "$TRAIN" "$cfg" --quiet --verify --set train.shuffle=false
expect_rc 0
expect_out 'vgpu_train: verify passed'
expect_no_shm
finish
