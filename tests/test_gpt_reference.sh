#!/usr/bin/env bash
# test_gpt_reference.sh: the PyTorch reference of the GPT (tests/gpt_reference.py)
# checks itself on a tiny shape (L=2, NH=2, C=16, T=8, B=3): init, then a step
# whose gradient file agrees with float64 finite differences (a few entries of
# every tensor, done by the script), files of exactly the layout's size, the
# parameters moved; a second step from there (attention's gradients larger),
# unclipped; train's first step the same bits as step's; train's loss files;
# train --text's sequences and its schedule.
# Skipped (exit 77, said) without python3, PyTorch or NumPy.
set -uo pipefail
# shellcheck source=script_lib.sh source-path=SCRIPTDIR
. "$(dirname "$0")/script_lib.sh" # ok, bad, run, skip, need_torch, finish; $PY
RUN_LIMIT_S=120 # run's bound: the reference's commands are short
REF=$(cd "$(dirname "$0")" && pwd)/gpt_reference.py
need_torch
WORK=$(mktemp -d /tmp/vgpu-gptref.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
# expect WHAT CMD...: WHAT holds when CMD succeeds.
expect() {
  local what=$1
  shift
  if "$@"; then ok "$what"; else bad "not so: $what"; fi
}
has() { grep -Eq "$1" <<<"$out"; } # has REGEX: $out matches it
not() { ! "$@"; }

L=2 NH=2 C=16 T=8 B=3
SHAPE=(--layers "$L" --heads "$NH" --channels "$C" --context "$T")
# The layout's float count: wte, wpe, L blocks, ln_f.
count=$((256 * C + T * C + L * (2 * C + 3 * C * C + 3 * C + C * C + C + 2 * C + 4 * C * C + 4 * C + 4 * C * C + C) + 2 * C))
size_is() { # FILE: exactly count float32s
  local got
  got=$(stat -c %s "$1" 2>/dev/null || echo missing)
  if [ "$got" = $((count * 4)) ]; then ok "$(basename "$1") is $count float32s"
  else out=""; bad "$1: $got bytes, want $((count * 4)) ($count float32s)"; fi
}

run "--help" "$PY" "$REF" --help
expect "--help lists the modes" has "^ +init +write"
run "init" "$PY" "$REF" init "${SHAPE[@]}" --seed 1 --out "$WORK/params.bin"
size_is "$WORK/params.bin"
# Tokens: int32 [B, T+1], and 2 batches [2, B, T+1] for train, 4 validation rows.
"$PY" -c 'import sys, numpy as np
g = np.random.default_rng(3)
g.integers(0, 256, (3, 9)).astype("<i4").tofile(sys.argv[1])
g.integers(0, 256, (2, 3, 9)).astype("<i4").tofile(sys.argv[2])
g.integers(0, 256, (4, 9)).astype("<i4").tofile(sys.argv[3])' \
  "$WORK/tokens.bin" "$WORK/batches.bin" "$WORK/val.bin" || bad "making the tokens"

OPT=(--batch "$B" --lr 0.05 --beta1 0.9 --beta2 0.95 --eps 1e-8 --weight-decay 0.1 --clip 1.0)
run "step with --check-fd" "$PY" "$REF" step "${SHAPE[@]}" "${OPT[@]}" --params "$WORK/params.bin" \
  --tokens "$WORK/tokens.bin" --out "$WORK/s1" --check-fd 2
expect "the gradient file matches finite differences" has "^fd-check: 56 entries, .*: ok$"
for f in grads.bin params_after.bin; do size_is "$WORK/s1/$f"; done
loss=$(cat "$WORK/s1/loss.txt" 2>/dev/null)
# At GPT-2's initialisation the prediction is near uniform: ln 256 = 5.545.
if awk -v l="$loss" 'BEGIN { exit !(l > 5.3 && l < 5.8) }'; then ok "loss $loss is near ln 256"
else out=$loss; bad "loss '$loss' is not near ln 256"; fi
expect "grad_norm.txt holds a number" grep -Eq '^[0-9.e+-]+$' "$WORK/s1/grad_norm.txt"
expect "params_after.bin differs from params.bin" \
  not cmp -s "$WORK/params.bin" "$WORK/s1/params_after.bin"

# From the moved parameters q's and k's gradients are no longer near 0.
run "second step, unclipped, with --check-fd" "$PY" "$REF" step "${SHAPE[@]}" "${OPT[@]}" --clip 0 \
  --params "$WORK/s1/params_after.bin" --tokens "$WORK/tokens.bin" --out "$WORK/s2" --check-fd 2
expect "the second gradient file matches too" has "^fd-check: 56 entries, .*: ok$"

# train: its first step is step's, bit for bit; then the loss files.
run "train 1 step" "$PY" "$REF" train "${SHAPE[@]}" "${OPT[@]}" --params "$WORK/params.bin" --steps 1 \
  --batches "$WORK/tokens.bin" --out "$WORK/t1"
expect "train's first step leaves step's parameters" \
  cmp -s "$WORK/s1/params_after.bin" "$WORK/t1/params_after.bin"
printf '0.01\n0.02\n' >"$WORK/lr.txt"
run "train 2 steps with --lr-file and --val" "$PY" "$REF" train "${SHAPE[@]}" "${OPT[@]}" \
  --params "$WORK/params.bin" --steps 2 --batches "$WORK/batches.bin" --lr-file "$WORK/lr.txt" \
  --val "$WORK/val.bin" --eval-every 1 --out "$WORK/t2"
out=$(cat "$WORK/t2/train_loss.txt" "$WORK/t2/val.txt")
expect "train_loss.txt has a loss a step" [ "$(wc -l <"$WORK/t2/train_loss.txt")" = 2 ]
expect "val.txt has the evaluation after each step" \
  [ "$(grep -Ec '^step=[12] val_loss=[0-9.]+ val_bpb=[0-9.]+$' "$WORK/t2/val.txt")" = 2 ]

# train --text: vgpu_train's sequences of a directory's text files (name
# order; links and *.dat skipped). 100 bytes, context 8, val_fraction 0.1: the
# last 10 bytes validate, the training part ends at byte 89 (one past its
# last whole sequence): 11 training rows, and 1 validation row of the last 11
# bytes. Batch s of 3 is rows [3s, 3s+3), wrapping after the 3 whole
# batches. The rates: warm-up 2 steps to 0.1, then a cosine over 4 steps.
mkdir "$WORK/text"
"$PY" -c 'import sys; open(sys.argv[1], "wb").write(bytes(range(10, 70)))' "$WORK/text/a"
"$PY" -c 'import sys; open(sys.argv[1], "wb").write(bytes(range(70, 110)))' "$WORK/text/b"
printf 'skipped' >"$WORK/text/a.dat"
ln -s a "$WORK/text/c"
run "train --text" "$PY" "$REF" train "${SHAPE[@]}" "${OPT[@]}" --params "$WORK/params.bin" \
  --steps 6 --text "$WORK/text" --schedule cosine --warmup-steps 2 --lr 0.1 --out "$WORK/tx"
expect "11 training and 1 validation sequences" \
  has "text: $WORK/text: 11 training and 1 validation sequences of 8$"
"$PY" - "$REF" "$WORK/text" <<'PYEOF' >"$WORK/rows.txt" 2>&1
import importlib.util, sys
spec = importlib.util.spec_from_file_location("ref", sys.argv[1])
ref = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ref)
train, val = ref.split_text(ref.read_text(sys.argv[2]), 8, 0.1)
batches = ref.text_batches(train, 6, 3)
print(train[0].tolist(), train[10].tolist(), val.tolist(), batches[:, 0, 0].tolist())
PYEOF
out=$(cat "$WORK/rows.txt")
expect "row 0 is bytes 0-8, row 10 bytes 80-88, the validation row bytes 89-97; batches wrap" \
  [ "$out" = "[10, 11, 12, 13, 14, 15, 16, 17, 18] [90, 91, 92, 93, 94, 95, 96, 97, 98] \
[[99, 100, 101, 102, 103, 104, 105, 106, 107]] [10, 34, 58, 10, 34, 58]" ]
out=$(tr '\n' ' ' <"$WORK/tx/lr.txt")
expect "lr.txt: the warm-up, then the cosine" \
  [ "$out" = "0.05 0.1 0.1 0.0853553391 0.05 0.0146446609 " ]

# A parameter file of another shape is refused, naming the sizes.
rc=0
out=$(timeout 120 "$PY" "$REF" step --layers 1 --heads "$NH" --channels "$C" --context "$T" \
  --batch "$B" --params "$WORK/params.bin" --tokens "$WORK/tokens.bin" --out "$WORK/s3" 2>&1) || rc=$?
expect "a parameter file of another shape is refused" [ "$rc" = 1 ]
expect "... with a message naming the sizes" has "the layout needs"

finish
