#!/usr/bin/env bash
# determinism.sh: train.deterministic = true gives bitwise-identical parameters
# (params_crc) for 1, 2, 4 and 8 ranks, for equal and weighted splits, and
# across repeated runs; on the synthetic config and on a Fashion-MNIST subset.
source "$(dirname "$0")/lib.sh"

# params_crc_of NAME NP ARGS...: runs vgpu_train and sets $crc to its
# params_crc; empty on failure, so a failed run never compares equal.
params_crc_of() {
  local name=$1 np=$2
  shift 2
  crc=""
  run "$name" 120 "$MPIRUN" -np "$np" "$TRAIN" --quiet "$@"
  [ "$rc" = 0 ] || { bad "$name: exit $rc"; return; }
  crc=$(tail -n 1 <<<"$out" | grep -oE 'params_crc=[0-9a-f]+' | cut -d= -f2)
}

# crc_of NAME NP ARGS...: the same in deterministic mode.
crc_of() {
  local name=$1 np=$2
  shift 2
  params_crc_of "$name" "$np" --set train.deterministic=true "$@"
}

# same_crc LABEL REF: the last crc_of matched REF.
same_crc() {
  if [ -n "$crc" ] && [ "$crc" = "$2" ]; then ok "$1: params_crc $crc"; else bad "$1: params_crc '$crc', expected $2"; fi
}

syn=("$CONFIGS/synthetic_small.ini" --set train.max_steps=50)
crc_of "synthetic np=1" 1 "${syn[@]}"; ref=$crc
[ -n "$ref" ] && ok "synthetic np=1: params_crc $ref"
for np in 2 4 8; do
  crc_of "synthetic np=$np" $np "${syn[@]}"; same_crc "synthetic np=$np" "$ref"
done
crc_of "synthetic np=2 weights 0.8,0.2" 2 "${syn[@]}" --set train.batch_weights=0.8,0.2
same_crc "weighted 0.8,0.2" "$ref"
crc_of "synthetic np=3 weights 3,0.5,1 (M not a multiple of N)" 3 "${syn[@]}" --set train.batch_weights=3,0.5,1
same_crc "weighted 3,0.5,1" "$ref"
crc_of "synthetic np=4 mpi backend" 4 "${syn[@]}" --set comm.backend=mpi
same_crc "mpi backend" "$ref"
crc_of "synthetic np=4 again" 4 "${syn[@]}"
same_crc "repeated np=4" "$ref"
# The epoch tail (drop_last = false, 2048 = 31 * 66 + 2) with micro-batches of 0 rows.
crc_of "tail np=1" 1 "${syn[@]}" --set train.batch_size=66 --set train.max_steps=0 --set train.epochs=1; tail_ref=$crc
crc_of "tail np=4" 4 "${syn[@]}" --set train.batch_size=66 --set train.max_steps=0 --set train.epochs=1
same_crc "epoch tail np=4" "$tail_ref"

# The control: without deterministic mode the sums are reassociated by rank
# count and differ in the last bits, so equal CRCs above are not an accident
# of a check that cannot tell runs apart.
params_crc_of "normal np=1" 1 "${syn[@]}"; n1=$crc
params_crc_of "normal np=4" 4 "${syn[@]}"; n4=$crc
if [ -n "$n1" ] && [ -n "$n4" ] && [ "$n1" != "$n4" ]; then
  ok "control: normal mode np=1 and np=4 differ ($n1, $n4)"
else
  bad "control: normal mode gave '$n1' and '$n4'; they must be two different CRCs"
fi

fm=("$CONFIGS/default.ini" --set data.train_limit=4096 --set train.max_steps=50 --set train.epochs=1)
if [ -d /usr/share/datasets/fashion-mnist ]; then
  crc_of "fashion-mnist subset np=1" 1 "${fm[@]}"; fref=$crc
  [ -n "$fref" ] && ok "fashion-mnist np=1: params_crc $fref"
  for np in 2 4; do
    crc_of "fashion-mnist subset np=$np" $np "${fm[@]}"; same_crc "fashion-mnist np=$np" "$fref"
  done
else
  echo "skipped: the Fashion-MNIST part (no /usr/share/datasets/fashion-mnist; apt-get install dataset-fashion-mnist)"
fi
expect_no_shm
finish
