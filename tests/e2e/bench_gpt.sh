#!/usr/bin/env bash
# bench_gpt.sh: scripts/bench_gpt.sh works, briefly (one small shape, 3 steps
# a run, 2 rounds, 1 and 2 ranks): vgpu_train and PyTorch DDP each run, the
# table has a row a rank count with both rates and their ratios, the runs'
# line lists each side's rates, and it ends OK; a bad setting ends FAILED with
# exit 1. No timing is asserted. Skipped without python3-torch or fortunes.
source "$(dirname "$0")/lib.sh"
PY=${VGPU_PYTHON:-/usr/bin/python3}
"$PY" -c 'import torch' 2>/dev/null || skip "PyTorch not importable by $PY (apt-get install python3-torch)"
[ -d /usr/share/games/fortunes ] || skip "fortunes is not installed (apt-get install fortunes)"
bench=$VGPU_SOURCE_DIR/scripts/bench_gpt.sh

run "bench_gpt.sh, one small shape" 240 env VGPU_BENCH_REPEAT=2 VGPU_BENCH_SHAPES=1,2,16,16 \
  VGPU_BENCH_STEPS=3 "$bench"
expect_rc 0
echo "$out"
expect_out '^# host: [0-9]+ cores, .*; torch [0-9.a-z+]+; 1 thread a rank$'
expect_out '^shape +params +np +steps +vgpu_tok_s +torch_tok_s +vgpu/torch +paired$'
for np in 1 2; do
  expect_out "^L1 H2 C16 T16 +7664 +$np +3 +[1-9][0-9]* +[1-9][0-9]* +[0-9.]+x +[0-9.]+x$"
  expect_out "^# 1,2,16,16 np=$np runs \(tokens/s\): vgpu [0-9]+ [0-9]+ \| torch [0-9]+ [0-9]+ $"
done
if [ "$(tail -n 1 <<<"$out")" = OK ]; then ok "ends OK"; else bad "last line: $(tail -n 1 <<<"$out")"; fi

run "bench_gpt.sh, steps for another number of shapes" 60 env VGPU_BENCH_STEPS="3 3" \
  VGPU_BENCH_SHAPES=1,2,16,16 "$bench"
expect_rc 1
expect_out 'VGPU_BENCH_STEPS gives 2 step counts for 1 shapes'
if [ "$(tail -n 1 <<<"$out")" = FAILED ]; then ok "ends FAILED"; else bad "last line: $(tail -n 1 <<<"$out")"; fi
expect_no_shm
finish
