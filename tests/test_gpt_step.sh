#!/usr/bin/env bash
# test_gpt_step.sh: one step of vgpu_train's transformer (model.type = gpt,
# tests/gpt_step.c: the trainer's model, the gradients' all-reduce, the clip,
# AdamW) against the same step in PyTorch (tests/gpt_reference.py) from the
# same parameters and tokens, on 1 and 2 ranks of CPU devices: the loss, the
# gradient norm, and every tensor of the gradient and of the updated
# parameters within 1e-5 relative (each tensor's L2 distance over its norm).
# Twice: from GPT-2's initialisation, and from parameters a few steps on
# (where attention's q and k gradients are no longer near 0), with one step
# that clips and one that does not. Skipped (exit 77, said) without
# python3-torch.
set -uo pipefail
# shellcheck source=script_lib.sh source-path=SCRIPTDIR
. "$(dirname "$0")/script_lib.sh" # ok, bad, run, skip, need_torch, finish; $PY
HERE=$(cd "$(dirname "$0")" && pwd)
REF=$HERE/gpt_reference.py
BUILD=${VGPU_BUILD_DIR:-$HERE/../build}
STEP=$BUILD/gpt_step
need_torch
[ -x "$STEP" ] || { echo "FAILED: $STEP not built"; exit 1; }
MPIRUN=$HERE/../scripts/mpirun.sh # adds --allow-run-as-root, --oversubscribe where needed
WORK=$(mktemp -d /tmp/vgpu-gptstep.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

L=2 NH=2 C=16 T=8 B=4
SHAPE=(--layers $L --heads $NH --channels $C --context $T --threads 1)
# eps 1e-4, not 1e-8: Adam's first step moves a parameter by about lr *
# g / (|g| + eps), which for a gradient that is 0 but for rounding (the key
# bias's: softmax ignores what it adds to a row) is lr times the sign of that
# rounding; with eps above such noise the update follows the gradient itself.
LR=0.01 BETA1=0.9 BETA2=0.95 EPS=1e-4 WD=0.1
cat >"$WORK/gpt.ini" <<EOF
[model]
type = gpt
layers = $L
heads = $NH
channels = $C
context = $T
[train]
optimizer = adamw
lr = $LR
beta1 = $BETA1
beta2 = $BETA2
eps = $EPS
weight_decay = $WD
EOF
# compare DIR_A DIR_B CLIP: vgpu's files (DIR_A) against PyTorch's: the numbers,
# every tensor, and the gradient the optimizer clipped (vgpu's grads_clipped.bin)
# against PyTorch's gradient times clip_grad_norm_'s factor.
compare() {
  "$PY" - "$1" "$2" "$3" $L $C $T <<'EOF'
import sys
import numpy as np
a, b, clip = sys.argv[1], sys.argv[2], float(sys.argv[3])
L, C, T = map(int, sys.argv[4:])
V = 256
names = ["wte", "wpe"]
sizes = [V * C, T * C]
block = [("ln1.weight", C), ("ln1.bias", C), ("attn.qkv.weight", 3 * C * C),
         ("attn.qkv.bias", 3 * C), ("attn.proj.weight", C * C), ("attn.proj.bias", C),
         ("ln2.weight", C), ("ln2.bias", C), ("mlp.fc.weight", 4 * C * C), ("mlp.fc.bias", 4 * C),
         ("mlp.proj.weight", 4 * C * C), ("mlp.proj.bias", C)]
for l in range(L):
    for n, s in block:
        names.append(f"h{l}.{n}")
        sizes.append(s)
names += ["ln_f.weight", "ln_f.bias"]
sizes += [C, C]
bad = 0
for f in ["loss.txt", "grad_norm.txt"]:
    x, y = float(open(f"{a}/{f}").read()), float(open(f"{b}/{f}").read())
    rel = abs(x - y) / max(abs(y), 1e-30)
    print(f"{f}: vgpu {x:.9g} torch {y:.9g} rel {rel:.2e}")
    bad += rel > 1e-5
for f in ["grads.bin", "params_after.bin"]:
    x, y = np.fromfile(f"{a}/{f}", "<f4"), np.fromfile(f"{b}/{f}", "<f4")
    if x.size != y.size or x.size != sum(sizes):
        print(f"{f}: {x.size} and {y.size} floats, the layout has {sum(sizes)}")
        bad += 1
        continue
    worst, at, where = 0.0, 0, names[0]
    for n, s in zip(names, sizes):
        xs, ys = x[at:at + s].astype(np.float64), y[at:at + s].astype(np.float64)
        at += s
        rel = np.linalg.norm(xs - ys) / max(np.linalg.norm(ys), 1e-30)
        if rel > worst:
            worst, where = rel, n
        if rel > 1e-5:
            print(f"{f}: {n}: rel {rel:.2e}")
            bad += 1
    print(f"{f}: worst tensor {where}: rel {worst:.2e}")
norm = float(open(f"{b}/grad_norm.txt").read())
coef = clip / (norm + 1e-6) if clip > 0 and clip / (norm + 1e-6) < 1 else 1.0
x = np.fromfile(f"{a}/grads_clipped.bin", "<f4").astype(np.float64)
y = np.fromfile(f"{b}/grads.bin", "<f4").astype(np.float64) * coef
rel = np.linalg.norm(x - y) / np.linalg.norm(y)
print(f"grads_clipped.bin: factor {coef:.6g}, rel {rel:.2e}")
bad += rel > 1e-5
sys.exit(1 if bad else 0)
EOF
}

run "PyTorch init" "$PY" "$REF" init "${SHAPE[@]}" --seed 5 --out "$WORK/p0.bin"
"$PY" -c 'import sys, numpy as np
np.random.default_rng(7).integers(0, 256, (4, 9)).astype("<i4").tofile(sys.argv[1])' \
  "$WORK/tokens.bin" || bad "making the tokens"
# Parameters a few steps on: PyTorch trains 3 steps on the same rows.
cat "$WORK/tokens.bin" "$WORK/tokens.bin" "$WORK/tokens.bin" >"$WORK/batches.bin"
run "PyTorch 3 steps" "$PY" "$REF" train "${SHAPE[@]}" --batch $B --lr 0.05 --params "$WORK/p0.bin" \
  --steps 3 --batches "$WORK/batches.bin" --out "$WORK/warm"
cp "$WORK/warm/params_after.bin" "$WORK/p3.bin" 2>/dev/null || bad "no warmed-up parameters"

for start in p0 p3; do
  for clip in 0 0.1; do
    sed "/^\[train\]/a grad_clip = $clip" "$WORK/gpt.ini" >"$WORK/step.ini"
    ref=$WORK/ref-$start-$clip
    run "PyTorch step from $start, clip $clip" "$PY" "$REF" step "${SHAPE[@]}" --batch $B \
      --lr $LR --beta1 $BETA1 --beta2 $BETA2 --eps $EPS --weight-decay $WD --clip $clip \
      --params "$WORK/$start.bin" --tokens "$WORK/tokens.bin" --out "$ref"
    for np in 1 2; do
      mine=$WORK/vgpu-$start-$clip-np$np
      mkdir -p "$mine"
      run "vgpu step from $start, clip $clip, $np rank(s)" "$MPIRUN" -np $np "$STEP" \
        "$WORK/step.ini" "$WORK/$start.bin" "$WORK/tokens.bin" "$mine"
      what="vgpu = PyTorch: from $start, clip $clip, $np rank(s)"
      if out=$(compare "$mine" "$ref" $clip 2>&1); then ok "$what"; else bad "$what"; fi
      printf '%s\n' "$out" | sed 's/^/    /'
    done
  done
done

finish
