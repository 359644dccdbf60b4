#!/usr/bin/env bash
# bad_input.sh: bad command lines and configs end with a clear message and
# exit status 2 on every rank, before any training.
source "$(dirname "$0")/lib.sh"
cfg="$CONFIGS/synthetic_small.ini"

run "unknown flag" 30 "$MPIRUN" -np 2 "$TRAIN" --frobnicate
expect_rc 2
expect_out 'unknown option --frobnicate'

for bad_value in -1 abc 12Q; do
  run "memory_limit=$bad_value" 30 "$MPIRUN" -np 4 "$TRAIN" "$cfg" --set "devices.memory_limit=$bad_value"
  expect_rc 2
  expect_out "devices.memory_limit: '$bad_value' is not a size"
done

run "memory_limit larger than the machine" 30 "$MPIRUN" -np 4 "$TRAIN" "$cfg" --set devices.memory_limit=4T
expect_rc 2
expect_out 'cannot hold its 4 ranks: caps 16.0 TiB'

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

run "missing config" 30 "$MPIRUN" -np 2 "$TRAIN" "$WORK/nope.ini"
expect_rc 2
expect_out 'nope.ini: cannot open config'

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
finish
