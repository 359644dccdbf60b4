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
# What the picture says (the gnuplot program, --script): the title names the
# job (from the trace) and what the file covers; the throughput axis starts
# at 0 (a few percent must not look like a collapse); the train line is drawn
# from the train rows alone, all of them in order, so it does not break at
# every eval row (every epoch).
run "the program behind the picture, with the trace" 20 "$PLOT" "$csv" --trace "$WORK/run.json" --script
expect_rc 0
expect_out '^set multiplot layout 4,1 title "vgpu_train: 2 ranks, ring, synthetic, 90 steps, epoch [0-9]+, resumed 1 time \(run\.csv\)"$'
program=$out
samples_range=$(awk '/^set ylabel "samples\/s"/ { on = 1 } on && /^set yrange/ { print; exit }' <<<"$program")
if [ "$samples_range" = "set yrange [0:*]" ]; then ok "the throughput axis starts at 0"
else bad "the throughput panel's range: '$samples_range'"; fi
block=$(awk '/^\$train << EOD$/ { on = 1; next } on && /^EOD$/ { exit } on' <<<"$program")
if [ -n "$block" ] && [ "$block" = "$(grep '^train,' "$csv")" ]; then
  ok "the train line is the $(wc -l <<<"$block") train rows, in order"
else bad "the train block is not the CSV's train rows"; fi
if grep -q '^plot .*1/0' <<<"$program"; then bad "a plot draws from rows made undefined (lines break there)"
else ok "no plot skips rows with undefined points"; fi
run "the program, without the trace" 20 "$PLOT" "$csv" --script
expect_rc 0
expect_out '^set multiplot layout 3,1 title "vgpu_train: 90 steps, epoch [0-9]+, resumed 1 time \(run\.csv\)"$'
run "--title" 20 "$PLOT" "$csv" --script --title 'my "best" run'
expect_rc 0
expect_out '^set multiplot layout 3,1 title "vgpu_train: my \\"best\\" run \(run\.csv\)"$'

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
