#!/usr/bin/env bash
# plot_metrics.sh (test): scripts/plot_metrics.sh draws a real run's --metrics
# CSV (a resumed one, with its seam) as a PNG of some size, and with the run's
# --trace a taller one (the per-rank panel); a file that is not a metrics CSV
# or not a trace, or a missing one, is refused with exit 2.
source "$(dirname "$0")/lib.sh"
command -v gnuplot >/dev/null || skip "gnuplot not found (apt-get install gnuplot-nox)"
PLOT=$VGPU_SOURCE_DIR/scripts/plot_metrics.sh
csv=$WORK/run.csv
run "train 60 steps with --metrics" 60 "$MPIRUN" -np 2 "$TRAIN" "$CONFIGS/synthetic_small.ini" --quiet \
  --set train.max_steps=60 --set train.log_every=10 --set checkpoint.every_steps=30 \
  --set "checkpoint.dir=$WORK/ck" --metrics "$csv" --trace "$WORK/run.json"
expect_rc 0
run "resume to 90 steps into the same CSV" 60 "$MPIRUN" -np 2 "$TRAIN" "$CONFIGS/synthetic_small.ini" \
  --quiet --set train.max_steps=90 --set train.epochs=3 --set train.log_every=10 \
  --resume "$WORK/ck" --metrics "$csv"
expect_rc 0
run "plot it" 60 "$PLOT" "$csv" "$WORK/run.png"
expect_rc 0
expect_out "^plot_metrics: wrote $WORK/run.png\$"
magic=$(head -c 8 "$WORK/run.png" 2>/dev/null | od -An -tx1 | tr -d ' \n')
size=$(stat -c %s "$WORK/run.png" 2>/dev/null || echo 0)
if [ "$magic" = 89504e470d0a1a0a ]; then ok "a PNG"; else bad "not a PNG (magic $magic)"; fi
if [ "$size" -gt 20000 ]; then ok "$size bytes"; else bad "only $size bytes"; fi
run "default output name" 60 "$PLOT" "$csv"
expect_rc 0
[ -s "$WORK/run.png" ] && ok "run.png beside run.csv" || bad "no run.png"

# png_height FILE: the PNG's height (its IHDR, bytes 20..23).
png_height() { od -An -tu1 -j20 -N4 "$1" | awk '{ print $1 * 16777216 + $2 * 65536 + $3 * 256 + $4 }'; }
plain=$(png_height "$WORK/run.png")
if command -v python3 >/dev/null; then
  run "plot it with the trace's per-rank panel" 60 "$PLOT" "$csv" "$WORK/ranks.png" --trace "$WORK/run.json"
  expect_rc 0
  expect_out "^plot_metrics: wrote $WORK/ranks.png\$"
  tall=$(png_height "$WORK/ranks.png" 2>/dev/null || echo 0)
  if [ "${tall:-0}" -gt "${plain:-0}" ]; then ok "a fourth panel: $tall px high, $plain without"
  else bad "with --trace $tall px high, without $plain"; fi
  run "--trace of a file that is not a trace" 20 "$PLOT" "$csv" "$WORK/x.png" --trace "$csv"
  expect_rc 2
  expect_out "is not JSON"
  if [ ! -e "$WORK/x.png" ]; then ok "no picture made"; else bad "x.png made from a bad trace"; fi
else
  echo "SKIP: the --trace panel (python3 not found)"
fi
run "--trace without a file" 20 "$PLOT" "$csv" --trace
expect_rc 2
expect_out "^usage: "

printf 'a,b\n1,2\n' >"$WORK/other.csv"
run "not a metrics CSV" 20 "$PLOT" "$WORK/other.csv"
expect_rc 2
expect_out "is not a vgpu_train metrics CSV"
run "no such file" 20 "$PLOT" "$WORK/none.csv"
expect_rc 2
expect_out "cannot read"
finish
