#!/usr/bin/env bash
# bad_input.sh: bad command lines and configs end with a clear message and
# exit status 2 on every rank, before any training; through scripts/mpirun.sh
# the message is the last word (no Open MPI report after it).
source "$(dirname "$0")/lib.sh"
cfg="$CONFIGS/synthetic_small.ini"

run "unknown flag" 30 "$MPIRUN" -np 2 "$TRAIN" --frobnicate
expect_rc 2
expect_out 'unknown option --frobnicate'
expect_no_banner
if [ "$(grep -c . <<<"$out")" = 1 ]; then ok "one line"; else bad "$(grep -c . <<<"$out") lines"; fi

# scripts/mpirun.sh checks the program before starting mpirun, as the shell would.
run "a program that is not there" 30 "$MPIRUN" -np 2 "$WORK/no-such-program"
expect_rc 127
expect_out "^mpirun.sh: $WORK/no-such-program: No such file or directory\$"
run "a program that is not executable" 30 "$MPIRUN" -np 2 "$cfg"
expect_rc 126
expect_out 'synthetic_small.ini: not executable$'
run "a program not on PATH" 30 "$MPIRUN" -np 2 no-such-program-here
expect_rc 127
expect_out 'no-such-program-here: command not found'

for bad_value in -1 abc 12Q 0x10; do
  run "memory_limit=$bad_value" 30 "$MPIRUN" -np 4 "$TRAIN" "$cfg" --set "devices.memory_limit=$bad_value"
  expect_rc 2
  expect_out "devices.memory_limit: '$bad_value' is not a size"
done

run "memory_limit larger than the machine" 30 "$MPIRUN" -np 4 "$TRAIN" "$cfg" --set devices.memory_limit=4T
expect_rc 2
expect_out 'cannot hold its 4 ranks: caps 16.0 TiB'

run "caps whose sum wraps 64 bits" 30 "$MPIRUN" -np 2 "$TRAIN" "$cfg" --set devices.memory_limit=9223372036871553024
expect_rc 2
expect_out 'cannot hold its 2 ranks'

# Each rank holds its own copy of the data: it must fit the host's memory.
run "synthetic set larger than the host" 30 "$MPIRUN" -np 4 "$TRAIN" "$cfg" \
  --set data.synthetic_train=16777216 --set data.synthetic_features=1048576
expect_rc 2
expect_out 'the synthetic set \(16777216 \+ 512 samples x 1048576 features\) takes 64.0 TiB a rank; each of the 4 ranks on this host has [0-9.]+ [KMGT]iB of the'

run "memory_limit below what the job needs" 30 "$MPIRUN" -np 4 "$TRAIN" "$cfg" --set devices.memory_limit=64K
expect_rc 2
expect_out 'devices.memory_limit = 64.0 KiB is below the .* each rank needs'
run "memory_limit as a bare number" 30 "$MPIRUN" -np 2 "$TRAIN" "$cfg" --set devices.memory_limit=1
expect_rc 2
expect_out 'devices.memory_limit = 1 B is below the .* each rank needs \(a number without a unit is bytes'

printf '[train]\nepochs = 2\nlrr = 0.1\n' >"$WORK/typo.ini"
run "unknown key" 30 "$MPIRUN" -np 2 "$TRAIN" "$WORK/typo.ini"
expect_rc 2
expect_out "typo.ini:3: unknown key 'lrr' in \[train\]; did you mean 'train.lr'\?"

# Values are decimal: strtod would read 0x10 as 16.
run "lr=0x10" 30 "$MPIRUN" -np 2 "$TRAIN" "$cfg" --set train.lr=0x10
expect_rc 2
expect_out "train.lr: '0x10' is not a number"

# libinih reads lines into a 200-byte buffer: a longer line used to be cut
# and its tail ("every_steps = 5") applied as a line of its own.
printf '[train]\nepochs = 2\n[checkpoint]\ndir = %s/%0200d/every_steps = 5\n' "$WORK" 0 >"$WORK/long.ini"
run "300-character line" 30 "$MPIRUN" -np 2 "$TRAIN" "$WORK/long.ini"
expect_rc 2
expect_out 'long.ini:4: line longer than 198 characters'

run "missing config" 30 "$MPIRUN" -np 2 "$TRAIN" "$WORK/nope.ini"
expect_rc 2
expect_out 'nope.ini: cannot open config'

run "config that is a directory" 30 "$MPIRUN" -np 2 "$TRAIN" "$WORK"
expect_rc 2
expect_out "$WORK: a directory, not a config file"

# A data.path the user set must hold the data (the synthetic fallback is for
# the default path only), and the summary names the data a run used.
run "data.path that does not exist" 30 "$MPIRUN" -np 2 "$TRAIN" "$CONFIGS/default.ini" \
  --set "data.path=$WORK/no-such-data"
expect_rc 2
expect_out "$WORK/no-such-data: dataset files not found"
expect_no_out 'using the synthetic dataset instead'

# Text (data.dataset = text): a path that does not exist (no synthetic
# fallback), a text too short for the split, and text under the MLP, which
# takes no token rows.
run "text: data.path that does not exist" 30 "$MPIRUN" -np 2 "$TRAIN" "$cfg" \
  --set data.dataset=text --set "data.path=$WORK/no-such-text"
expect_rc 2
expect_out "$WORK/no-such-text: cannot open: No such file or directory"
expect_no_out 'using the synthetic dataset instead'
printf 'too short' >"$WORK/short.txt"
run "text: shorter than the split needs" 30 "$MPIRUN" -np 2 "$TRAIN" "$cfg" \
  --set data.dataset=text --set "data.path=$WORK/short.txt"
expect_rc 2
expect_out "short.txt: 9 bytes of text is too short: the training part .* needs at least context \+ 1 = 129 bytes"
head -c 4000 /dev/zero | tr '\0' 'a' >"$WORK/text.txt"
run "text under the MLP" 30 "$MPIRUN" -np 2 "$TRAIN" "$cfg" \
  --set data.dataset=text --set "data.path=$WORK/text.txt" --set model.context=16
expect_rc 2
expect_out "model.type = mlp takes rows of 16 values with 1 label each; the data's rows are 16 tokens with 16 labels each \(data.dataset = text\)"

run "conflicting keys" 30 "$MPIRUN" -np 2 "$TRAIN" "$cfg" --set devices.memory_fraction=0.5
expect_rc 2
expect_out 'memory_limit and devices.memory_fraction conflict'

# Only rank 0 opens the metrics file: the others must not wait for it.
run "metrics file in a missing directory" 30 "$MPIRUN" -np 2 "$TRAIN" "$cfg" --metrics "$WORK/no/such/dir/m.csv"
expect_rc 2
expect_out 'cannot write metrics to .*m.csv: No such file or directory'
expect_within 15

: >"$WORK/afile"
run "checkpoint.dir is a file" 30 "$MPIRUN" -np 2 "$TRAIN" "$cfg" --set "checkpoint.dir=$WORK/afile"
expect_rc 2
expect_out 'checkpoint directory .*afile: Not a directory'
expect_no_out 'epoch'
expect_no_shm

# A gzip bomb: 4 KB of .gz whose header claims 1048576 images of 32x32 (1 GiB;
# 4 MiB of zeros are there). All four headers are checked before any pixel
# is decompressed: the train/test size mismatch, then data.max_bytes.
bomb="$WORK/bomb"
mkdir "$bomb"
# idx_gz NAME HEADER ZEROS: NAME.gz holds HEADER (big-endian words as octal
# printf escapes; spaces only for reading) and ZEROS zero bytes.
idx_gz() { { printf "${2// /}"; head -c "$3" /dev/zero; } | gzip >"$bomb/$1.gz"; }
idx_gz train-images-idx3-ubyte '\0\0\10\3 \0\20\0\0 \0\0\0\40 \0\0\0\40' $((4 << 20)) # 1048576 of 32x32
idx_gz train-labels-idx1-ubyte '\0\0\10\1 \0\20\0\0' 0                              # 1048576
idx_gz t10k-images-idx3-ubyte '\0\0\10\3 \0\0\0\3 \0\0\0\34 \0\0\0\34' $((3 * 28 * 28)) # 3 of 28x28
idx_gz t10k-labels-idx1-ubyte '\0\0\10\1 \0\0\0\3' 3
bomb_set=(--set data.dataset=mnist-idx --set "data.path=$bomb")
run "gzip bomb, test images of another size" 30 "$MPIRUN" -np 2 "$TRAIN" "$cfg" "${bomb_set[@]}"
expect_rc 2
expect_out 't10k-images-idx3-ubyte.gz: test images are 28x28 but .*train-images-idx3-ubyte.gz holds 32x32'
expect_within 15
idx_gz t10k-images-idx3-ubyte '\0\0\10\3 \0\0\0\3 \0\0\0\40 \0\0\0\40' $((3 * 32 * 32)) # 3 of 32x32
run "gzip bomb over data.max_bytes" 30 "$MPIRUN" -np 2 "$TRAIN" "$cfg" "${bomb_set[@]}"
expect_rc 2
expect_out 'train-images-idx3-ubyte.gz: header claims 1048576 images of 32x32, 1073741824 bytes; .* over the limit of 1073741824 \(data.max_bytes\)'
expect_within 15
finish
