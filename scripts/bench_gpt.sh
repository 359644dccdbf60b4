#!/usr/bin/env bash
# bench_gpt.sh: tokens/s of vgpu_train's transformer against PyTorch DDP on
# the same job, side by side in one run. For each shape (the tiny preset's
# and a larger one) and rank count, vgpu_train (configs/gpt_tiny.ini: AdamW,
# cosine with warm-up, clip; its shape set by --set) and
# scripts/bench_gpt_ddp.py (PyTorch DDP, gloo, the model of
# tests/gpt_reference.py, the same optimizer, schedule and clip) train the
# same steps on the same global batch of fortunes' sequences in file order,
# one thread a rank; runs alternate (vgpu first in even rounds, PyTorch first
# in odd ones) and each cell is the median of its runs. Both clocks cover the
# training steps only (after one warm-up pass): vgpu_train's tokens/s is its
# summary line's samples_per_s x context. The ratio is vgpu / PyTorch, of the
# medians and the median of the rounds' own ratios. Ends with OK, or FAILED
# (exit 1) when a run failed.
# Usage: scripts/bench_gpt.sh
# Env: VGPU_BUILD_DIR (default build), VGPU_PYTHON (default /usr/bin/python3:
#      Debian's python3-torch), VGPU_BENCH_NPS ("1 2"), VGPU_BENCH_REPEAT
#      (rounds, default 3), VGPU_BENCH_SHAPES (layers,heads,channels,context
#      a shape; default "2,4,64,64 4,4,128,128"), VGPU_BENCH_STEPS (steps a
#      run for each shape, default "60 12"), VGPU_BENCH_BATCH (global batch,
#      sequences; default the preset's, 32).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${VGPU_BUILD_DIR:-build}
py=${VGPU_PYTHON:-/usr/bin/python3}
preset=configs/gpt_tiny.ini
text=/usr/share/games/fortunes
nps=(${VGPU_BENCH_NPS:-1 2})
repeat=${VGPU_BENCH_REPEAT:-3}
shapes=(${VGPU_BENCH_SHAPES:-2,4,64,64 4,4,128,128})
steps=(${VGPU_BENCH_STEPS:-60 12})
fail() { echo "bench_gpt: $*" >&2; echo "FAILED"; exit 1; }
[ -x "$build/vgpu_train" ] || fail "$build/vgpu_train not built (cmake --build $build --target vgpu_train)"
"$py" -c 'import torch' 2>/dev/null || fail "$py cannot import torch (apt-get install python3-torch)"
[ -d "$text" ] || fail "$text missing (apt-get install fortunes)"
[ "${#steps[@]}" = "${#shapes[@]}" ] || fail "VGPU_BENCH_STEPS gives ${#steps[@]} step counts for ${#shapes[@]} shapes"
# ini SECTION KEY DEFAULT: the preset's value.
ini() {
  local v
  v=$(awk -v sec="[$1]" -v key="$2" '/^\[/ { on = ($1 == sec); next }
        on && $1 == key && $2 == "=" { print $3; exit }' "$preset")
  echo "${v:-$3}"
}
batch=${VGPU_BENCH_BATCH:-$(ini train batch_size 32)}
lr=$(ini train lr 0.001) beta1=$(ini train beta1 0.9) beta2=$(ini train beta2 0.999)
eps=$(ini train eps 1e-8) wd=$(ini train weight_decay 0) warm=$(ini train warmup_steps 0)
clip=$(ini train grad_clip 0) schedule=$(ini train schedule constant)
[ "$schedule" = cosine ] || fail "$preset's schedule is $schedule; bench_gpt_ddp.py has the cosine only"
# The validation part is not timed by either side: keep vgpu's evaluation short.
valf=0.001
echo "# bench_gpt: vgpu_train against PyTorch DDP (gloo), tokens/s = sequences/s x context"
load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "# host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //');" \
     "torch $("$py" -c 'import torch; print(torch.__version__)'); 1 thread a rank"
echo "# load average at the start: $(load)"
echo "# $preset's optimizer (AdamW lr $lr, betas $beta1/$beta2, wd $wd, cosine, warm-up $warm," \
     "clip $clip), global batch $batch, $text in file order; median of $repeat alternating run(s)"

work=$(mktemp -d /tmp/bench_gpt.XXXXXX)
trap 'rm -rf "$work"' EXIT
# vgpu_run NP L H C T STEPS: sets $tok (vgpu_train's tokens/s): the summary
# line's samples_per_s, as the --metrics CSV's last training row gives it to
# 0.1 (the line rounds it to 1, a few % of the larger shape's rate).
vgpu_run() {
  local line sps
  rm -f "$work/m.csv"
  line=$(scripts/mpirun.sh -np "$1" "$build/vgpu_train" "$preset" --quiet \
    --set model.layers="$2" --set model.heads="$3" --set model.channels="$4" \
    --set model.context="$5" --set train.max_steps="$6" --set train.batch_size="$batch" \
    --set train.shuffle=false --set devices.cpu_threads=1 --set data.val_fraction=$valf \
    --set "data.path=$text" --metrics "$work/m.csv" 2>&1 | tail -1) || true
  grep -q 'status=ok' <<<"$line" || fail "vgpu_train np=$1 shape $2,$3,$4,$5 failed: $line"
  sps=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "samples_per_s") c = i }
                 $1 == "train" { v = $c } END { print v }' "$work/m.csv")
  [ -n "$sps" ] || fail "vgpu_train np=$1 shape $2,$3,$4,$5: no samples_per_s in its metrics"
  tok=$(awk -v s="$sps" -v t="$5" 'BEGIN { printf "%.0f", s * t }')
}
# torch_run NP L H C T STEPS: sets $tok (PyTorch DDP's tokens/s).
torch_run() {
  local line
  line=$("$py" scripts/bench_gpt_ddp.py --np "$1" --layers "$2" --heads "$3" --channels "$4" \
    --context "$5" --steps "$6" --batch "$batch" --lr "$lr" --beta1 "$beta1" --beta2 "$beta2" \
    --eps "$eps" --weight-decay "$wd" --warmup-steps "$warm" --clip "$clip" --text "$text" \
    --val-fraction $valf 2>&1 | tail -1) || true
  tok=$(grep -oE 'tokens_per_s=[0-9.]+' <<<"$line" | cut -d= -f2)
  [ -n "$tok" ] || fail "bench_gpt_ddp.py np=$1 shape $2,$3,$4,$5 failed: $line"
  tok=${tok%.*}
}

declare -A ours theirs ratios
for ((r = 0; r < repeat; r++)); do
  for i in "${!shapes[@]}"; do
    IFS=, read -r L H C T <<<"${shapes[$i]}"
    for np in "${nps[@]}"; do
      key="$i/$np"
      if ((r % 2 == 0)); then
        vgpu_run "$np" "$L" "$H" "$C" "$T" "${steps[$i]}"; v=$tok
        torch_run "$np" "$L" "$H" "$C" "$T" "${steps[$i]}"; t=$tok
      else
        torch_run "$np" "$L" "$H" "$C" "$T" "${steps[$i]}"; t=$tok
        vgpu_run "$np" "$L" "$H" "$C" "$T" "${steps[$i]}"; v=$tok
      fi
      ours[$key]+="$v " theirs[$key]+="$t "
      ratios[$key]+="$(awk -v a="$v" -v b="$t" 'BEGIN { printf "%.3f", a / b }') "
    done
  done
done

median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
printf '%-18s %8s %3s %6s %12s %12s %11s %8s\n' shape params np steps vgpu_tok_s torch_tok_s \
  vgpu/torch paired
for i in "${!shapes[@]}"; do
  IFS=, read -r L H C T <<<"${shapes[$i]}"
  params=$((256 * C + T * C + L * (12 * C * C + 13 * C) + 2 * C))
  for np in "${nps[@]}"; do
    key="$i/$np"
    v=$(median "${ours[$key]}") t=$(median "${theirs[$key]}") p=$(median "${ratios[$key]}")
    printf '%-18s %8d %3d %6d %12d %12d %10.2fx %7.2fx\n' "L$L H$H C$C T$T" "$params" "$np" \
      "${steps[$i]}" "$v" "$t" "$(awk -v a="$v" -v b="$t" 'BEGIN { print a / b }')" "$p"
  done
done
for i in "${!shapes[@]}"; do
  for np in "${nps[@]}"; do
    echo "# ${shapes[$i]} np=$np runs (tokens/s): vgpu ${ours[$i/$np]}| torch ${theirs[$i/$np]}"
  done
done
echo "# load average at the end: $(load)"
echo "OK"
