#!/usr/bin/env bash
# checkpoint_guard.sh: what --resume accepts and what a checkpoint directory
# keeps. Checkpoints whose CRCs are right but whose content means nothing (a
# position no run reaches, parameters that are not finite) are refused with
# exit 2 and the reason; --resume DIR takes the newest valid checkpoint,
# saying which newer ones it passed over; checkpoint.keep_last keeps the
# newest; temporary files a dead writer left are removed at start; a
# directory every user may write, or one another running job writes into, is
# refused.
source "$(dirname "$0")/lib.sh"
cfg="$CONFIGS/synthetic_small.ini"
field() { grep -oE "$1=[^ ]+" <<<"$2" | tail -1 | cut -d= -f2; }

# Reference: 64 steps in one go, and a checkpoint at step 40 of the same run.
run "uninterrupted" 60 "$MPIRUN" -np 2 "$TRAIN" "$cfg" --quiet
expect_rc 0
full_crc=$(field params_crc "$out")
run "40 steps, checkpoints every 10, keep the newest 2" 60 "$MPIRUN" -np 2 "$TRAIN" "$cfg" --quiet \
  --set train.max_steps=40 --set checkpoint.every_steps=10 --set checkpoint.keep_last=2 \
  --set "checkpoint.dir=$WORK/ck"
expect_rc 0
kept=$(ls "$WORK/ck" | grep '^ckpt-' | tr '\n' ' ')
if [ "$kept" = "ckpt-0000000030.bin ckpt-0000000040.bin " ]; then ok "keep_last = 2 kept $kept"; else bad "kept: $kept"; fi
good="$WORK/ck/ckpt-0000000040.bin"
# By default the newest 3 stay (every checkpoint of a long run filled disks),
# and keep_last = 0 keeps them all.
run "50 steps, checkpoints every 10, keep_last by default" 60 "$MPIRUN" -np 2 "$TRAIN" "$cfg" --quiet \
  --set train.max_steps=50 --set checkpoint.every_steps=10 --set "checkpoint.dir=$WORK/ck3"
expect_rc 0
kept=$(ls "$WORK/ck3" | grep '^ckpt-' | tr '\n' ' ')
if [ "$kept" = "ckpt-0000000030.bin ckpt-0000000040.bin ckpt-0000000050.bin " ]; then
  ok "the default kept the newest 3: $kept"; else bad "the default kept: $kept"; fi
run "50 steps, checkpoints every 10, keep_last = 0" 60 "$MPIRUN" -np 2 "$TRAIN" "$cfg" --quiet \
  --set train.max_steps=50 --set checkpoint.every_steps=10 --set checkpoint.keep_last=0 \
  --set "checkpoint.dir=$WORK/ck0"
expect_rc 0
kept=$(ls "$WORK/ck0" | grep -c '^ckpt-')
if [ "$kept" = 5 ]; then ok "keep_last = 0 kept all 5"; else bad "keep_last = 0 kept $kept"; fi

# craft OUT FIELD VALUE: a copy of the good checkpoint with one header field
# (or the first parameter, FIELD=param0) set, its CRCs made right again.
craft() {
  python3 - "$good" "$1" "$2" "$3" <<'PY'
import struct, sys, zlib
src, dst, field, value = sys.argv[1:]
b = bytearray(open(src, 'rb').read())
at = {'step': (124, '<q'), 'epoch': (132, '<q'), 'batch': (140, '<q'), 'nranks': (164, '<i')}
if field == 'param0':
    b[200:204] = struct.pack('<f', float(value))
    struct.pack_into('<I', b, 192, zlib.crc32(bytes(b[200:])))
else:
    off, fmt = at[field]
    struct.pack_into(fmt, b, off, int(value))
struct.pack_into('<I', b, 196, zlib.crc32(bytes(b[:196])))
open(dst, 'wb').write(b)
PY
}
if command -v python3 >/dev/null; then
  for c in "step $((1 << 62)) a position no run can be at" "epoch -1 a position no run can be at" \
           "batch -3 a position no run can be at" "nranks 0 a position no run can be at" \
           "param0 nan are NaN or infinite" "param0 inf are NaN or infinite"; do
    read -r f v why <<<"$c"
    craft "$WORK/crafted.bin" "$f" "$v"
    run "crafted: $f = $v" 60 "$MPIRUN" -np 2 "$TRAIN" "$cfg" --quiet --resume "$WORK/crafted.bin"
    expect_rc 2
    expect_out "cannot resume: .*crafted.bin: .*$why"
  done
else
  echo "SKIP the crafted checkpoints: python3 is not installed (apt-get install python3)"
fi

# --resume DIR: the newest valid checkpoint; a damaged newer one is passed over.
mkdir -p "$WORK/dir" && chmod 755 "$WORK/dir"
cp "$good" "$WORK/dir/"
head -c 300 "$good" >"$WORK/dir/ckpt-0000000050.bin"
run "--resume DIR" 60 "$MPIRUN" -np 2 "$TRAIN" "$cfg" --resume "$WORK/dir"
expect_rc 0
expect_out "passing over .*ckpt-0000000050.bin: truncated"
expect_out "resumed from $WORK/dir/ckpt-0000000040.bin at step 40"
if [ "$(field params_crc "$out")" = "$full_crc" ]; then ok "same params_crc as uninterrupted"; else bad "params_crc $(field params_crc "$out") != $full_crc"; fi
mkdir -p "$WORK/empty"
run "--resume of a directory with no checkpoint" 60 "$MPIRUN" -np 2 "$TRAIN" "$cfg" --quiet --resume "$WORK/empty"
expect_rc 2
expect_out "cannot resume: .*empty holds no checkpoint"

# A dead writer's temporary file is removed when the next run claims the directory.
touch "$WORK/ck/ckpt-0000000050.bin.tmp.Xy12Zw"
run "temporary file left" 60 "$MPIRUN" -np 2 "$TRAIN" "$cfg" --quiet --set train.max_steps=45 \
  --set "checkpoint.dir=$WORK/ck" --resume "$WORK/ck"
expect_rc 0
expect_out "removed 1 unfinished checkpoint file \(\*\.tmp\.\*\)"
if ls "$WORK/ck" | grep -q tmp; then bad "a temporary file is left: $(ls "$WORK/ck")"; else ok "no temporary file left"; fi

# A directory every user may write is refused (anyone could plant the newest checkpoint).
mkdir -p "$WORK/open" && chmod 1777 "$WORK/open"
run "world-writable checkpoint.dir" 60 "$MPIRUN" -np 2 "$TRAIN" "$cfg" --quiet --set "checkpoint.dir=$WORK/open"
expect_rc 2
expect_out "checkpoint directory .*open is writable by every user \(mode 777\)"

# Two jobs, one directory: the second is refused while the first runs.
VGPU_TEST_START_PAUSE=warmup:4 "$MPIRUN" -np 2 "$TRAIN" "$cfg" --quiet --set "checkpoint.dir=$WORK/shared" \
  >"$WORK/first.out" 2>&1 &
first=$!
for _ in $(seq 100); do grep -q "test pause at warmup" "$WORK/first.out" && break; sleep 0.1; done
run "second job in the same directory" 60 "$MPIRUN" -np 2 "$TRAIN" "$cfg" --quiet --set "checkpoint.dir=$WORK/shared"
expect_rc 2
expect_out "checkpoint directory .*shared is in use by another running job \(pid [0-9]+\)"
wait "$first"
rc=$?
expect_rc 0
finish
