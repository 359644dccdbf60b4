#!/usr/bin/env bash
# test_gpt_curve.sh: vgpu_train's transformer trains as PyTorch does, over a
# whole (short) run, not one step. The tiny preset (configs/gpt_tiny.ini: its
# shape, AdamW, cosine schedule with warm-up, clip) trains 150 steps on 2
# ranks from parameters tests/gpt_reference.py init wrote (model.init_file),
# on Debian's fortunes in file order (train.shuffle = false); the reference
# (gpt_reference.py train --text) trains the same model from the same file on
# the same sequences, made from the text as the trainer makes them (its
# --text mirrors worker/dataset_text.c), batch s being rows [s*B, (s+1)*B),
# with the schedule computed on its own. What it proves, step by step:
#   - the learning rate of each step is the warm-up and cosine PyTorch's
#     side computes (1e-5: the CSV's 6 digits);
#   - the training loss of each of the first 50 steps agrees within 1e-4
#     (measured 2.2e-7: same data, same order, same updates), and every one
#     of the 150 within 1% (measured 4.1e-7; float rounding grows with the
#     steps: 4.0e-4 with 64 channels and the element-function attention);
#   - the validation loss at the end (every validation sequence) agrees
#     within 1% (measured 1.1e-8: vgpu 2.633900, PyTorch 2.633900).
# Planted faults fail it (by hand, in worker/optim.c): the schedule one step
# late (optim_lr_at's step - 1) fails all four checks, the final validation
# loss 3.2% off; the clip disabled (optim_clip returning at once) fails the
# curve from step 43 (9.3%) and the validation loss (6.2%). Labels mpi,
# worker, slow (about 30 s on 2 cores of an AMD EPYC).
# Skipped (exit 77, said) without python3-torch or fortunes.
set -uo pipefail
# shellcheck source=script_lib.sh source-path=SCRIPTDIR
. "$(dirname "$0")/script_lib.sh" # ok, bad, run, skip, need_torch, finish; $PY
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=${VGPU_SOURCE_DIR:-$HERE/..}
REF=$HERE/gpt_reference.py
BUILD=${VGPU_BUILD_DIR:-$HERE/../build}
TRAIN=$BUILD/vgpu_train
TEXT=/usr/share/games/fortunes
PRESET=$SRC/configs/gpt_tiny.ini
need_torch
[ -d "$TEXT" ] || skip "fortunes is not installed (apt-get install fortunes)"
[ -x "$TRAIN" ] || { echo "FAILED: $TRAIN not built"; exit 1; }
MPIRUN=$SRC/scripts/mpirun.sh
WORK=$(mktemp -d /tmp/vgpu-gptcurve.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
# ini SECTION KEY [DEFAULT]: the preset's value (vgpu_train's default when absent).
ini() {
  local v
  v=$(awk -v sec="[$1]" -v key="$2" '
    /^\[/ { on = ($1 == sec); next }
    on && $1 == key && $2 == "=" { print $3; exit }' "$PRESET")
  echo "${v:-${3:-}}"
}

STEPS=150 NP=2 SEED=1
L=$(ini model layers) NH=$(ini model heads) C=$(ini model channels) T=$(ini model context)
B=$(ini train batch_size) LR=$(ini train lr) BETA1=$(ini train beta1 0.9)
BETA2=$(ini train beta2 0.999) EPS=$(ini train eps 1e-8) WD=$(ini train weight_decay 0)
SCHEDULE=$(ini train schedule constant) WARMUP=$(ini train warmup_steps 0)
CLIP=$(ini train grad_clip 0) VALF=$(ini data val_fraction 0.1)
echo "preset: L=$L NH=$NH C=$C T=$T B=$B lr=$LR betas=$BETA1,$BETA2 eps=$EPS wd=$WD" \
  "$SCHEDULE warm-up $WARMUP clip $CLIP val_fraction $VALF; $STEPS steps on $NP ranks"
SHAPE=(--layers "$L" --heads "$NH" --channels "$C" --context "$T" --threads 1)

run "PyTorch init" "$PY" "$REF" init "${SHAPE[@]}" --seed $SEED --out "$WORK/p0.bin"
# Every setting the comparison rests on is set, not left to the preset.
run "vgpu_train, $STEPS steps on $NP ranks" "$MPIRUN" -np $NP "$TRAIN" "$PRESET" --quiet \
  --set "model.init_file=$WORK/p0.bin" --set train.shuffle=false --set train.epochs=1 \
  --set train.max_steps=$STEPS --set train.log_every=1 --set "data.path=$TEXT" \
  --set train.optimizer=adamw --set train.beta1="$BETA1" --set train.eps="$EPS" \
  --set train.deterministic=false --metrics "$WORK/vgpu.csv"
echo "$out" | tail -1
run "PyTorch, $STEPS steps" "$PY" "$REF" train "${SHAPE[@]}" --params "$WORK/p0.bin" --batch "$B" \
  --lr "$LR" --beta1 "$BETA1" --beta2 "$BETA2" --eps "$EPS" --weight-decay "$WD" --clip "$CLIP" \
  --steps $STEPS --text "$TEXT" --val-fraction "$VALF" --schedule "$SCHEDULE" \
  --warmup-steps "$WARMUP" --out "$WORK/torch"
grep '^text:\|val_loss' <<<"$out"

# compare: the three checks of the head comment, one line each, "ok:" or "FAILED:".
out=$("$PY" - "$WORK/vgpu.csv" "$WORK/torch" $STEPS <<'EOF'
import csv, sys
path, ref, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = list(csv.DictReader(open(path)))
train = {int(r["step"]): r for r in rows if r["kind"] == "train"}
evals = [r for r in rows if r["kind"] == "eval"]
want_loss = [float(x) for x in open(f"{ref}/train_loss.txt")]
want_lr = [float(x) for x in open(f"{ref}/lr.txt")]
want_val = float(open(f"{ref}/val.txt").read().split("val_loss=")[1].split()[0])
def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-30)
def report(good, what):
    print(("ok: " if good else "FAILED: ") + what)
if sorted(train) != list(range(1, steps + 1)) or len(evals) != 1:
    report(False, f"the CSV has train rows for {len(train)} steps and {len(evals)} eval rows")
    sys.exit()
lr = [(rel(float(train[s]["lr"]), want_lr[s - 1]), s) for s in train]
worst, at = max(lr)
report(worst <= 1e-5, f"learning rates: worst step {at}: vgpu {train[at]['lr']}, "
       f"PyTorch {want_lr[at - 1]:.6g} (rel {worst:.2e}, bound 1e-5)")
loss = [(rel(float(train[s]["loss"]), want_loss[s - 1]), s) for s in train]
for first, bound in ((50, 1e-4), (steps, 1e-2)):
    worst, at = max(loss[:first])
    report(worst <= bound, f"training loss, steps 1-{first}: worst step {at}: vgpu "
           f"{train[at]['loss']}, PyTorch {want_loss[at - 1]:.6f} (rel {worst:.2e}, bound {bound:g})")
got_val = float(evals[0]["loss"])
report(rel(got_val, want_val) <= 1e-2, f"validation loss after {steps} steps: vgpu {got_val:.6f}, "
       f"PyTorch {want_val:.6f} (rel {rel(got_val, want_val):.2e}, bound 1e-2)")
EOF
)
while IFS= read -r line; do
  case $line in
    ok:*) ok "${line#ok: }" ;;
    *) out=""; bad "${line#FAILED: }" ;;
  esac
done <<<"$out"

finish && [ "$checks" -ge 7 ]
